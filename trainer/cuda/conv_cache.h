/* conv_cache.h — the per-machine cache of cuDNN's convolution algorithm choices, so that a
 * second run asks cuDNN nothing (conv_plan.c).
 *
 * One text file per machine (conv_cache_path): a line per choice, keyed by the GPU (name,
 * UUID, compute capability), cuDNN's version, how the choice was made (cuDNN's heuristics,
 * or timing with cudnnFind*), the direction, the element type, the math the choice was
 * asked under (strict FP32, TF32 allowed, tensor ops for half types), the layout and the
 * whole shape; its value is the algorithm, the math type it runs with and its workspace
 * bytes, so a cached choice needs no cuDNN query at all, not even for its workspace.
 *
 * The file is written whole, to a temporary name renamed over the old one, under a lock
 * on its folder, merged with what other processes wrote there meanwhile; it keeps the
 * CONV_CACHE_MAX_ENTRIES latest choices.  A file that is not one this code wrote (another
 * format, a truncated or edited line, over CONV_CACHE_MAX_BYTES) is ignored with one
 * warning line on stderr and replaced by the next write.  A cache that cannot be written
 * costs a warning line and nothing else: every choice can be made again.
 *
 * Pure host C with no CUDA types.  Internal to trainer/cuda/. */
#ifndef DDPPROF_CONV_CACHE_H
#define DDPPROF_CONV_CACHE_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CONV_CACHE_MAX_ENTRIES 4096
#define CONV_CACHE_MAX_BYTES ((size_t)2 << 20) /* 4096 lines of at most 512 bytes */
#define CONV_CACHE_GPU_LEN 256                  /* the GPU's identity, with its NUL */

/* the math a choice was asked for under (the convolution descriptor's math type when cuDNN
 * ranked it) */
enum conv_cache_math {
    CONV_CACHE_FMA = 0,       /* fp32 data, strict FP32 (--tf32 off) */
    CONV_CACHE_TENSOR_OP = 1, /* fp16 / bf16 data on tensor cores */
    CONV_CACHE_TF32 = 2,      /* fp32 data, TF32 tensor cores allowed (--tf32 on) */
};

struct conv_cache_key {
    char gpu[CONV_CACHE_GPU_LEN]; /* "NVIDIA H200|GPU-1a2b...|9.0": no tab, no newline */
    long cudnn;                   /* cudnnGetVersion() */
    int find;                     /* 0 cuDNN's heuristics, 1 timed (cudnnFind*) */
    int dir;                      /* conv_plan.h enum conv_dir: 0 fwd, 1 bwd data, 2 bwd filter */
    int dtype;                    /* backend.h enum dtype: 0 fp32, 1 fp16, 2 bf16 */
    int math;                     /* enum conv_cache_math */
    int layout;                   /* backend.h enum layout: 0 nchw, 1 nhwc (filters krsc) */
    int n, c, h, w, k, r, s, pad, stride, dilation, groups; /* the shape, (n,c,h,w) */
};

struct conv_cache_value {
    int algo;     /* cuDNN's algorithm enum of that direction */
    int math;     /* the cudnnMathType_t it runs with */
    size_t ws;    /* its workspace bytes */
};

struct conv_cache;

/* Where the cache lives: DDPPROF_CUDNN_CACHE when set and not empty ("off": nowhere), else
 * $XDG_CACHE_HOME/ddpprof/cudnn-algos.tsv, else $HOME/.cache/ddpprof/cudnn-algos.tsv.  1
 * with the path in buf, 0 when there is none (off, no HOME, or a path longer than cap). */
int conv_cache_path(char *buf, size_t cap);

/* The cache at path, read now (a missing file is an empty cache; a corrupt or foreign one
 * is empty after one warning line on stderr).  NULL + error_set only for want of memory;
 * free with conv_cache_free. */
struct conv_cache *conv_cache_open(const char *path);
void conv_cache_free(struct conv_cache *c);

/* the path it was opened with */
const char *conv_cache_file(const struct conv_cache *c);

/* 1 with *v filled when k was cached, else 0 */
int conv_cache_find(const struct conv_cache *c, const struct conv_cache_key *k,
                    struct conv_cache_value *v);

/* Remember k -> v, in memory and in the file (merged with the file's current lines, the
 * oldest dropped past CONV_CACHE_MAX_ENTRIES).  0, or -1 when the file could not be
 * written: one warning line on stderr the first time, the choice still kept in memory. */
int conv_cache_put(struct conv_cache *c, const struct conv_cache_key *k,
                   const struct conv_cache_value *v);

/* k as the file's key columns (tab-separated, no newline); 0, or -1 when a field cannot be
 * written (a tab or newline in gpu, an enum out of range, a size < 1) or cap is too small */
int conv_cache_key_text(const struct conv_cache_key *k, char *buf, size_t cap);

#ifdef __cplusplus
}
#endif
#endif
