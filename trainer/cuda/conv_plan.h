/* conv_plan.h — the CUDA backend's cuDNN convolutions: for every shape and element type,
 * the descriptors and the algorithms worth trying in each direction, and running a
 * direction with the best one that works.
 *
 * Choosing costs no ranking where it need not (issue 34: cuDNN's full ranking of 16
 * candidates took 0.3-1.8 s per fp16 shape on an H200).  Each direction asks, in turn and
 * only while every candidate so far has failed: the per-machine cache of earlier runs'
 * choices (conv_cache.h: no query at all); cuDNN's heuristics for their first result
 * (cudnnGet*Algorithm_v7 asked for 1), taken when it is the one the whole ranking would
 * put first; the whole ranking (or, with find_algos, every algorithm timed: cudnnFind*).
 * Within the ranking deterministic algorithms come first and strict fp32 results that
 * report TF32 math last; each candidate runs with its math type (strict fp32: FMA; fp32
 * with tf32 and half types: the one cuDNN ranked it with).  An algorithm that fails when
 * run with a cuDNN error is dropped for good and the next one tried; one that cannot get
 * its workspace memory is skipped for that call only (conv_algos.h).  The choice that ran
 * goes to the cache.  Internal to trainer/cuda/. */
#ifndef DDPPROF_CONV_PLAN_H
#define DDPPROF_CONV_PLAN_H

#include <cuda_runtime.h>
#include <cudnn.h>

#include "backend/backend.h"
#include "cuda/cudnn_desc.h"

#ifdef __cplusplus
extern "C" {
#endif

enum conv_dir { CONV_FWD = 0, CONV_BWD_DATA = 1, CONV_BWD_FILTER = 2 };

struct conv_plans;

/* How the plans choose. */
struct conv_plans_opts {
    int find_algos;         /* rank by timing every algorithm (cudnnFind*), not by cuDNN's
                               heuristics: DDPPROF_CUDNN_BENCHMARK=1 */
    int tf32;               /* fp32 convolutions may run TF32 tensor cores (--tf32 on, as
                               torch.backends.cudnn.allow_tf32); 0: strict FP32 */
    const char *cache_path; /* the algorithm cache file (conv_cache.h), NULL: none */
    const char *gpu;        /* the GPU in the cache's keys: "name|uuid|cc" (no tab) */
};

/* Plans running on cudnn (a handle whose stream is `stream`), chosen as o says (copied).
 * The plans own their cuDNN workspace on `device`, grown on demand (the stream is drained
 * before an old one is freed).  The cache file is read now.  NULL + error_set; free with
 * conv_plans_free (the handle stays the caller's). */
struct conv_plans *conv_plans_create(cudnnHandle_t cudnn, cudaStream_t stream, int device,
                                     const struct conv_plans_opts *o);
void conv_plans_free(struct conv_plans *p);

/* Queue direction dir of convolution cs (p, q filled) with data of type dt, every tensor
 * in layout lay (cudnn_desc.h: NHWC filters KRSC), on the stream:
 *   CONV_FWD         out y (n,k,p,q) = conv(x (n,c,h,w), w (k,c,r,s))
 *   CONV_BWD_DATA    out dx (n,c,h,w) from w and dy (n,k,p,q)
 *   CONV_BWD_FILTER  out dw (k,c,r,s) from x and dy
 * (arguments a direction does not read may be NULL).  The plan of (cs, dt, lay) is made on
 * first use.  0, or -1 (error_set) naming the direction, the shape and cuDNN's error. */
int conv_plans_run(struct conv_plans *p, const struct conv2d_shape *cs, enum dtype dt,
                   enum layout lay, enum conv_dir dir, const void *x, const void *w,
                   const void *dy, void *out);

#ifdef __cplusplus
}
#endif
#endif
