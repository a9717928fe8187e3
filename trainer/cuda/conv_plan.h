/* conv_plan.h — the CUDA backend's cuDNN convolutions: for every shape and element type,
 * the descriptors and the algorithms worth trying in each direction, cached, and running
 * a direction with the best one that works.
 *
 * Candidates come from cuDNN's heuristics (or, with find_algos, from timing them:
 * cudnnFind*), deterministic ones first and fp32 results that report TF32 math last, each
 * run with its math type (fp32: strict FMA; fp16/bf16: tensor cores where cuDNN ranked
 * them so).  An algorithm that fails when run with a cuDNN error is dropped for good and
 * the next one tried; one that cannot get its workspace memory is skipped for that call
 * only (conv_algos.h).  Internal to trainer/cuda/. */
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

/* A cache of plans running on cudnn (a handle whose stream is `stream`).  The plans own
 * their cuDNN workspace on `device`, grown on demand (the stream is drained before an old
 * one is freed).  find_algos: rank algorithms by timing them instead of by cuDNN's
 * heuristics.  NULL + error_set; free with conv_plans_free (the handle stays the
 * caller's). */
struct conv_plans *conv_plans_create(cudnnHandle_t cudnn, cudaStream_t stream, int device,
                                     int find_algos);
void conv_plans_free(struct conv_plans *p);

/* Queue direction dir of convolution cs (p, q filled) with data of type dt on the stream:
 *   CONV_FWD         out y (n,k,p,q) = conv(x (n,c,h,w), w (k,c,r,s))
 *   CONV_BWD_DATA    out dx (n,c,h,w) from w and dy (n,k,p,q)
 *   CONV_BWD_FILTER  out dw (k,c,r,s) from x and dy
 * (arguments a direction does not read may be NULL).  The plan of (cs, dt) is made on
 * first use.  0, or -1 (error_set) naming the direction, the shape and cuDNN's error. */
int conv_plans_run(struct conv_plans *p, const struct conv2d_shape *cs, enum dtype dt,
                   enum conv_dir dir, const void *x, const void *w, const void *dy, void *out);

#ifdef __cplusplus
}
#endif
#endif
