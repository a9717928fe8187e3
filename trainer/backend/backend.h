/* backend.h — the device ops table.
 *
 * Every device-specific operation of the trainer is a slot in struct backend.  Layers,
 * models, DDP and AMP are written once against this table; `cpu` (backend_cpu.c, the
 * reference and the oracle) and `cuda` (trainer/cuda/backend_cuda.c) fill it.  Pointers named
 * x, y, w, dy, ... are device pointers of the backend that owns them (host memory for
 * cpu).  Layouts are PyTorch's: activations NCHW, conv weights (K,C,R,S), linear weights
 * (OUT,IN), all contiguous fp32 unless a slot says otherwise.
 *
 * Gradient outputs are overwritten, never accumulated: every parameter is used once per
 * forward in the models we train, and the DDP reducer reads a gradient the moment its
 * backward slot returns.  Backward slots take NULL for an output that is not needed
 * (dx of the first layer, db of a conv without bias). */
#ifndef DDPPROF_BACKEND_H
#define DDPPROF_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* x (n,c,h,w) * w (k,c,r,s) -> y (n,k,p,q), p = (h + 2*pad - r)/stride + 1, likewise q. */
struct conv2d_shape {
    int n, c, h, w;
    int k, r, s;
    int pad, stride;
    int p, q;
};

/* Fill p and q from the rest; returns -1 (error_set) when the output would be empty. */
int conv2d_shape_init(struct conv2d_shape *cs);

/* max pooling x (n,c,h,w) -> y (n,c,p,q), square window, no padding, floor mode. */
struct pool2d_shape {
    int n, c, h, w;
    int kernel, stride;
    int p, q;
};

int pool2d_shape_init(struct pool2d_shape *ps);

/* Autocast precision of conv and linear (torch.autocast): inputs, weights and outputs
 * rounded to the half type, accumulation in fp32.  Storage stays fp32 everywhere. */
enum amp_dtype { AMP_OFF = 0, AMP_F16 = 1, AMP_BF16 = 2 };

struct backend {
    const char *name; /* "cpu", "cuda" */

    /* --- memory --- */
    void *(*alloc)(struct backend *be, size_t bytes); /* zero-filled; NULL + error_set on failure */
    void (*free)(struct backend *be, void *ptr);      /* NULL is a no-op */
    void (*upload)(struct backend *be, void *dst, const void *host_src, size_t bytes);
    void (*download)(struct backend *be, void *host_dst, const void *src, size_t bytes);
    void (*copy)(struct backend *be, void *dst, const void *src, size_t bytes);
    void (*zero)(struct backend *be, void *dst, size_t bytes);
    void (*synchronize)(struct backend *be); /* wait for all queued work */

    /* --- state --- */
    /* 0 while every op queued so far succeeded; else -1 and error_set with the backend's
     * first asynchronous error (op, file, line, library error).  Work still running on the
     * device is not waited for: call after a sync point (softmax_xent, download,
     * synchronize) to cover everything before it.  cpu: always 0 (its slots run
     * synchronously and report nothing later). */
    int (*status)(struct backend *be);
    /* The stream every slot is queued on (a cudaStream_t as void *, so callers need no CUDA
     * headers), owned by the backend, for the probes' CUDA events and CUPTI; NULL on cpu. */
    void *(*stream)(struct backend *be);

    /* --- convolution (cross-correlation, as PyTorch) --- */
    /* y (n,k,p,q) = conv(x (n,c,h,w), w (k,c,r,s)) + b (k); b may be NULL */
    void (*conv2d_forward)(struct backend *be, const struct conv2d_shape *cs, const float *x,
                           const float *w, const float *b, float *y);
    /* from dy (n,k,p,q): dx (n,c,h,w), dw (k,c,r,s), db (k); any may be NULL */
    void (*conv2d_backward)(struct backend *be, const struct conv2d_shape *cs, const float *x,
                            const float *w, const float *dy, float *dx, float *dw, float *db);

    /* --- batch norm, in PyTorch's SyncBatchNorm decomposition ---
     * x, y, dy, dx are (n,c,hw); per-channel vectors are (c). */
    /* local batch statistics: mean and invstd = 1/sqrt(biased var + eps) */
    void (*batchnorm_stats)(struct backend *be, int n, int c, int hw, const float *x,
                            float eps, float *mean, float *invstd);
    /* merge `world` sets of (mean, invstd, count) (each array world*c, row r is rank r;
     * counts[r] = that rank's n*hw) into the global mean/invstd, and update the running
     * statistics with momentum and the unbiased global variance, as
     * torch.batch_norm_gather_stats_with_counts. running_* may be NULL. */
    void (*batchnorm_gather_stats)(struct backend *be, int world, int c, const float *means,
                                   const float *invstds, const float *counts, float momentum,
                                   float eps, float *running_mean, float *running_var,
                                   float *mean, float *invstd);
    /* y = (x - mean) * invstd * weight + bias */
    void (*batchnorm_elemt)(struct backend *be, int n, int c, int hw, const float *x,
                            const float *mean, const float *invstd, const float *weight,
                            const float *bias, float *y);
    /* eval: y = (x - running_mean) / sqrt(running_var + eps) * weight + bias */
    void (*batchnorm_forward_eval)(struct backend *be, int n, int c, int hw, const float *x,
                                   const float *running_mean, const float *running_var,
                                   float eps, const float *weight, const float *bias, float *y);
    /* sum_dy = sum(dy), sum_dy_xmu = sum(dy * (x - mean)) per channel; dweight =
     * sum_dy_xmu * invstd, dbias = sum_dy (either may be NULL) */
    void (*batchnorm_backward_reduce)(struct backend *be, int n, int c, int hw, const float *dy,
                                      const float *x, const float *mean, const float *invstd,
                                      float *sum_dy, float *sum_dy_xmu, float *dweight,
                                      float *dbias);
    /* dx = (dy - sum_dy/count - (x - mean) * invstd^2 * sum_dy_xmu/count) * invstd * weight,
     * count = global number of elements per channel; dx may alias dy */
    void (*batchnorm_backward_elemt)(struct backend *be, int n, int c, int hw, const float *dy,
                                     const float *x, const float *mean, const float *invstd,
                                     const float *weight, const float *sum_dy,
                                     const float *sum_dy_xmu, float count, float *dx);

    /* --- activations and pooling --- */
    void (*relu_forward)(struct backend *be, size_t n, const float *x, float *y);
    /* dx = dy where y > 0, else 0 (y is the forward output; dx may alias dy) */
    void (*relu_backward)(struct backend *be, size_t n, const float *y, const float *dy,
                          float *dx);
    /* y (n,c,p,q); argmax (n,c,p,q) holds the flat h*w index of each max within its plane */
    void (*maxpool2d_forward)(struct backend *be, const struct pool2d_shape *ps, const float *x,
                              float *y, int32_t *argmax);
    /* dx (n,c,h,w) is overwritten: zero, then each dy added at its argmax */
    void (*maxpool2d_backward)(struct backend *be, const struct pool2d_shape *ps,
                               const float *dy, const int32_t *argmax, float *dx);

    /* --- linear: y (n,out) = x (n,in) w^T (w is (out,in)) + b (out) --- */
    void (*linear_forward)(struct backend *be, int n, int in, int out, const float *x,
                           const float *w, const float *b, float *y);
    /* dx (n,in), dw (out,in), db (out); any may be NULL */
    void (*linear_backward)(struct backend *be, int n, int in, int out, const float *x,
                            const float *w, const float *dy, float *dx, float *dw, float *db);

    /* --- loss and metrics --- */
    /* mean softmax cross-entropy of logits (n,c) against labels (n) (device int32), returned
     * to the host; dlogits (n,c) = (softmax - onehot) / n unless NULL. */
    float (*softmax_xent)(struct backend *be, int n, int c, const float *logits,
                          const int32_t *labels, float *dlogits);
    /* number of rows whose argmax (first maximum) equals the label */
    int (*count_correct)(struct backend *be, int n, int c, const float *logits,
                         const int32_t *labels);

    /* --- elementwise --- */
    /* dst = alpha * src (dst may alias src) */
    void (*scale)(struct backend *be, size_t n, float alpha, const float *src, float *dst);

    /* --- mixed precision ---
     * dst = src rounded to the nearest dt value (round to nearest even; beyond the fp16
     * range: +-inf), stored as fp32 (dst may alias src); km_round_amp per element */
    void (*round_amp)(struct backend *be, size_t n, enum amp_dtype dt, const float *src,
                      float *dst);
    /* GradScaler unscale: g *= inv_scale in place; returns 1 if any result is inf or nan
     * (km_unscale per element), else 0.  A host sync point on devices. */
    int (*unscale_check)(struct backend *be, size_t n, float *g, float inv_scale);

    /* --- optimizer: torch.optim.SGD on one flat tensor ---
     * buf is the momentum buffer (ignored when momentum == 0); first != 0 on the first step
     * of that buffer (buf = d_p, as PyTorch's lazily created buffer). */
    void (*sgd_step)(struct backend *be, size_t n, float *param, const float *grad, float *buf,
                     float lr, float momentum, float dampening, float weight_decay,
                     int nesterov, int first);

    void (*destroy)(struct backend *be); /* frees the backend itself */
};

/* The CPU backend. threads: OpenBLAS/worker threads (0 = library default). NULL + error_set
 * on failure; free with be->destroy(be). */
struct backend *backend_cpu_create(int threads);

#ifdef __cplusplus
}
#endif
#endif
