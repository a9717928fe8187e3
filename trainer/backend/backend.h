/* backend.h — the device ops table.
 *
 * Every device-specific operation of the trainer is a slot in struct backend.  Layers,
 * models, DDP and AMP are written once against this table; `cpu` (backend_cpu.c, the
 * reference and the oracle) and `cuda` (trainer/cuda/backend_cuda.c) fill it.  Pointers named
 * x, y, w, dy, ... are device pointers of the backend that owns them (host memory for
 * cpu).  Shapes are PyTorch's: activations (N,C,H,W), conv weights (K,C,R,S), linear
 * weights (OUT,IN), all contiguous.  The order a 4-D tensor's elements are stored in is the
 * backend's layout for its element type (the layout slot): NCHW, PyTorch's contiguous
 * format, or NHWC, torch.channels_last (a conv weight (K,C,R,S) then stored (K,R,S,C)).
 * Every 4-D tensor a slot takes or produces (activations, conv weights as passed, argmax)
 * is in that layout; everything else (vectors, linear layers' tensors, parameters and
 * their fp32 gradients) has one order.  The cpu backend is NCHW throughout; cuda keeps
 * half tensors NHWC by default (--channels-last, backend_cuda.h).  A model converts its
 * input into the layout and its features out of it before a flatten (the convert slot);
 * cast_list converts the weights' autocast copies.
 *
 * Element types: parameters, their gradients, optimizer state, batch-norm statistics and
 * the loss are fp32 (float *).  The tensors of the ops that autocast touches (conv, linear,
 * batch norm, ReLU, pooling, the residual add: their inputs, weights as passed, outputs and
 * gradients)
 * are untyped (void *) and of the op's `enum dtype dt`, as a ggml tensor carries its type;
 * see enum dtype for how each backend stores a half type.
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

/* The order of a 4-D tensor (n,c,h,w)'s elements in memory: element (i,j,y,x) at
 * ((i*c + j)*h + y)*w + x (NCHW) or ((i*h + y)*w + x)*c + j (NHWC).  A tensor with h*w = 1
 * or c = 1 is stored the same in both. */
enum layout { LAYOUT_NCHW = 0, LAYOUT_NHWC = 1 };

/* The element type of an activation tensor.  Every op computes in fp32 (accumulating in
 * fp32 or better) from its inputs' values and rounds each output once to dt (round to
 * nearest even; beyond the fp16 range: +-inf), where PyTorch's CUDA kernels write a half
 * tensor.  How a backend stores a half type is its own (dtype_size): cuda stores 2-byte
 * fp16/bf16 values, so autocast runs on tensor cores and halves the activations' memory;
 * cpu stores fp32 values that dt represents exactly (and trusts its dt inputs to be such
 * values), so it computes what the CUDA backend computes, up to the order of fp32
 * accumulation, and stays the oracle. */
enum dtype { DT_F32 = 0, DT_F16 = 1, DT_BF16 = 2 };

/* Autocast (torch.autocast) of conv and linear: the half type their inputs, weights and
 * outputs are cast to, or AMP_OFF (fp32 throughout).  The same numbers as enum dtype, so
 * (enum dtype)amp is the activations' type. */
enum amp_dtype { AMP_OFF = DT_F32, AMP_F16 = DT_F16, AMP_BF16 = DT_BF16 };

struct backend;

/* be->alloc of numel elements of dt as be stores them (zero-filled); NULL + error_set */
void *backend_alloc_elems(struct backend *be, size_t numel, enum dtype dt);

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
    /* bytes one element of dt takes in this backend's memory: 4 for DT_F32; cpu 4 for
     * every type (it stores half values as fp32), cuda 2 for DT_F16 and DT_BF16 */
    size_t (*dtype_size)(struct backend *be, enum dtype dt);
    /* the layout of this backend's 4-D tensors of dt (see the top of this file): cpu
     * NCHW; cuda NHWC for the half types with channels-last on (the default), else NCHW */
    enum layout (*layout)(struct backend *be, enum dtype dt);

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

    /* --- convolution (cross-correlation, as PyTorch) ---
     * every tensor of dt: x, w, b as given (autocast passes half copies of the weights) */
    /* y (n,k,p,q) = conv(x (n,c,h,w), w (k,c,r,s)) + b (k); b may be NULL.  With a bias and
     * dt a half type, y = round(round(conv) + b), as PyTorch's cuDNN path, which adds the
     * bias to the convolution's half output. */
    void (*conv2d_forward)(struct backend *be, const struct conv2d_shape *cs, enum dtype dt,
                           const void *x, const void *w, const void *b, void *y);
    /* from dy (n,k,p,q): dx (n,c,h,w), dw (k,c,r,s), db (k); any may be NULL */
    void (*conv2d_backward)(struct backend *be, const struct conv2d_shape *cs, enum dtype dt,
                            const void *x, const void *w, const void *dy, void *dx, void *dw,
                            void *db);

    /* --- batch norm, in PyTorch's SyncBatchNorm decomposition ---
     * x, y, dy, dx are (n,c,hw) of dt; per-channel vectors are (c) fp32 (statistics,
     * weight, bias and their gradients stay fp32 under autocast, as in PyTorch). */
    /* local batch statistics: mean and invstd = 1/sqrt(biased var + eps) */
    void (*batchnorm_stats)(struct backend *be, int n, int c, int hw, enum dtype dt,
                            const void *x, float eps, float *mean, float *invstd);
    /* merge `world` sets of (mean, invstd, count) (each array world*c, row r is rank r;
     * counts[r] = that rank's n*hw) into the global mean/invstd, and update the running
     * statistics with momentum and the unbiased global variance, as
     * torch.batch_norm_gather_stats_with_counts. running_* may be NULL. */
    void (*batchnorm_gather_stats)(struct backend *be, int world, int c, const float *means,
                                   const float *invstds, const float *counts, float momentum,
                                   float eps, float *running_mean, float *running_var,
                                   float *mean, float *invstd);
    /* y = (x - mean) * invstd * weight + bias */
    void (*batchnorm_elemt)(struct backend *be, int n, int c, int hw, enum dtype dt,
                            const void *x, const float *mean, const float *invstd,
                            const float *weight, const float *bias, void *y);
    /* eval: y = (x - running_mean) / sqrt(running_var + eps) * weight + bias */
    void (*batchnorm_forward_eval)(struct backend *be, int n, int c, int hw, enum dtype dt,
                                   const void *x, const float *running_mean,
                                   const float *running_var, float eps, const float *weight,
                                   const float *bias, void *y);
    /* sum_dy = sum(dy), sum_dy_xmu = sum(dy * (x - mean)) per channel; dweight =
     * sum_dy_xmu * invstd, dbias = sum_dy (either may be NULL) */
    void (*batchnorm_backward_reduce)(struct backend *be, int n, int c, int hw, enum dtype dt,
                                      const void *dy, const void *x, const float *mean,
                                      const float *invstd, float *sum_dy, float *sum_dy_xmu,
                                      float *dweight, float *dbias);
    /* dx = (dy - sum_dy/count - (x - mean) * invstd^2 * sum_dy_xmu/count) * invstd * weight,
     * *count = global number of elements per channel, one fp32 in device memory (as
     * PyTorch's SyncBatchNorm keeps the gathered counts on the device: no host read); dx
     * may alias dy */
    void (*batchnorm_backward_elemt)(struct backend *be, int n, int c, int hw, enum dtype dt,
                                     const void *dy, const void *x, const float *mean,
                                     const float *invstd, const float *weight,
                                     const float *sum_dy, const float *sum_dy_xmu,
                                     const float *count, void *dx);

    /* --- activations and pooling (every tensor of dt) --- */
    void (*relu_forward)(struct backend *be, size_t n, enum dtype dt, const void *x, void *y);
    /* dx = dy where y > 0, else 0 (y is the forward output; dx may alias dy) */
    void (*relu_backward)(struct backend *be, size_t n, enum dtype dt, const void *y,
                          const void *dy, void *dx);
    /* y (n,c,p,q); argmax (n,c,p,q), in the layout of dt as y, holds the index y*w + x of
     * each max within its plane */
    void (*maxpool2d_forward)(struct backend *be, const struct pool2d_shape *ps, enum dtype dt,
                              const void *x, void *y, int32_t *argmax);
    /* dx (n,c,h,w) is overwritten: zero, then each dy added at its argmax (summed in fp32,
     * in output order, then rounded to dt) */
    void (*maxpool2d_backward)(struct backend *be, const struct pool2d_shape *ps,
                               enum dtype dt, const void *dy, const int32_t *argmax, void *dx);
    /* nn.AdaptiveAvgPool2d((p, q)) of x (n, c, h, w) -> y (n, c, p, q): output
     * (i, j) is the mean of rows [floor(i*h/p), ceil((i+1)*h/p)) and columns likewise,
     * summed in fp32 in row-major order, divided by the window's size, rounded to dt */
    void (*adaptive_avgpool2d_forward)(struct backend *be, int n, int c, int h, int w, int p,
                                       int q, enum dtype dt, const void *x, void *y);
    /* dx (n, c, h, w) is overwritten: each element the sum, over the windows holding it,
     * of dy / the window's size (in fp32, in output order), rounded to dt */
    void (*adaptive_avgpool2d_backward)(struct backend *be, int n, int c, int h, int w, int p,
                                        int q, enum dtype dt, const void *dy, void *dx);

    /* --- residual connection: y (n) = a + b, every tensor of dt (the fp32 sum rounded
     * once); y may alias a or b.  Its backward hands dy to both branches unchanged, and the
     * two gradients that meet at the block's input are joined by this same slot. --- */
    void (*add)(struct backend *be, size_t n, enum dtype dt, const void *a, const void *b,
                void *y);

    /* --- linear: y (n,out) = x (n,in) w^T (w is (out,in)) + b (out), every tensor of dt ---
     * The bias joins the fp32 accumulation (one rounding, as PyTorch's addmm). */
    void (*linear_forward)(struct backend *be, int n, int in, int out, enum dtype dt,
                           const void *x, const void *w, const void *b, void *y);
    /* dx (n,in), dw (out,in), db (out); any may be NULL */
    void (*linear_backward)(struct backend *be, int n, int in, int out, enum dtype dt,
                            const void *x, const void *w, const void *dy, void *dx, void *dw,
                            void *db);

    /* --- loss and metrics --- */
    /* mean softmax cross-entropy of logits (n,c) against labels (n) (device int32), returned
     * to the host; dlogits (n,c) = (softmax - onehot) / n unless NULL. */
    float (*softmax_xent)(struct backend *be, int n, int c, const float *logits,
                          const int32_t *labels, float *dlogits);
    /* the same, the loss written to *loss (one fp32 in device memory) instead of returned:
     * no host wait, so a training step reads its loss once, when it logs it (PyTorch's
     * loss.item()) */
    void (*softmax_xent_dev)(struct backend *be, int n, int c, const float *logits,
                             const int32_t *labels, float *dlogits, float *loss);
    /* number of rows whose argmax (first maximum) equals the label */
    int (*count_correct)(struct backend *be, int n, int c, const float *logits,
                         const int32_t *labels);

    /* --- elementwise --- */
    /* dst = alpha * src (dst may alias src) */
    void (*scale)(struct backend *be, size_t n, float alpha, const float *src, float *dst);

    /* --- mixed precision --- */
    /* dst (n, of type to) = src (n, of type from) converted: to a half type rounded to
     * nearest even (beyond the fp16 range: +-inf), to fp32 exactly.  Autocast's casts:
     * the weights' half copies, the input, the logits for the loss and back.  dst may
     * alias src only when both types take the same bytes in this backend. */
    void (*cast)(struct backend *be, size_t n, enum dtype from, const void *src,
                 enum dtype to, void *dst);
    /* dsts[i] (numels[i], of type to) = srcs[i] (numels[i], of type from) converted as cast
     * does, for every i < count, in one pass (PyTorch's _foreach_copy_ across types): the
     * autocast gradients of a DDP bucket's weights back to fp32 at once.  dims (NULL: none)
     * gives tensor i's 4-D shape (n,c,h,w) in dims[4i..4i+3], or dims[4i] = 0 for one that
     * is not 4-D: a 4-D one is read in the layout of from and written in the layout of to
     * (autocast's weight copies in the half type's layout).  srcs, dsts, numels and dims
     * are host arrays, read before the slot returns; dsts[i] may alias srcs[i] only as
     * cast allows, and not where the layouts differ. */
    void (*cast_list)(struct backend *be, int count, enum dtype from, const void *const *srcs,
                      enum dtype to, void *const *dsts, const size_t *numels,
                      const int *dims);
    /* dst (dims = n,c,h,w; of type to, stored in layout lt) = src (dims, of type from, in
     * layout lf) converted as cast does: a model's input into its layers' layout, their
     * features out of it before a flatten, and back in backward.  dst may not alias src
     * where the layouts differ (and h*w > 1 and c > 1). */
    void (*convert)(struct backend *be, const int dims[4], enum dtype from, enum layout lf,
                    const void *src, enum dtype to, enum layout lt, void *dst);
    /* dst = src rounded to the nearest dt value as cast does, but stored as fp32 on every
     * backend (dst may alias src); km_round_amp per element.  The CPU's storage of a half
     * tensor, available everywhere so a test can round its reference. */
    void (*round_amp)(struct backend *be, size_t n, enum amp_dtype dt, const float *src,
                      float *dst);
    /* GradScaler unscale of `count` fp32 gradient tensors in one pass, as
     * torch._amp_foreach_non_finite_check_and_unscale_: grads[i][j] *= inv_scale
     * (km_unscale) for j < numels[i]; *found_inf (device memory, one float) = 1 if any
     * result is inf or nan, else 0.  No host wait: the caller reads found_inf back (or
     * all-reduces it first).  grads and numels are host arrays, read before the slot
     * returns. */
    void (*unscale)(struct backend *be, int count, float *const *grads, const size_t *numels,
                    float inv_scale, float *found_inf);

    /* --- optimizers: torch.optim.SGD and Adam on one flat tensor ---
     * buf is the momentum buffer (ignored when momentum == 0); first != 0 on the first step
     * of that buffer (buf = d_p, as PyTorch's lazily created buffer). */
    void (*sgd_step)(struct backend *be, size_t n, float *param, const float *grad, float *buf,
                     float lr, float momentum, float dampening, float weight_decay,
                     int nesterov, int first);
    /* torch.optim.Adam (amsgrad off) on one flat tensor at its step-th step (1 for the
     * first): km_adam_update per element, with the step's bias corrections from
     * km_adam_scalars; exp_avg and exp_avg_sq start as zeros.  The hyper-parameters are
     * doubles, as PyTorch's Python floats, which it combines before rounding to float. */
    void (*adam_step)(struct backend *be, size_t n, float *param, const float *grad,
                      float *exp_avg, float *exp_avg_sq, double lr, double beta1,
                      double beta2, double eps, double weight_decay, long long step);

    void (*destroy)(struct backend *be); /* frees the backend itself */
};

/* Which convolution algorithms the CPU backend may run (--conv-algo), as cuDNN's algorithm
 * choice and torch.backends.cudnn.allow_tf32 trade accuracy for speed by choice only:
 *   CONV_ALGO_AUTO      the fastest of those within PyTorch's numerical class: per op,
 *                       an error against float64 within 4x of PyTorch float32's
 *                       (tests/test_conv_nmse.c): direct and GEMM convolutions, and the
 *                       backend's own Winograd F(2x2,3x3), whose transform constants are
 *                       0, +-1, +-1/2; never oneDNN's Winograd F(4x4,3x3);
 *   CONV_ALGO_DIRECT    direct (oneDNN) or im2col + GEMM convolutions only;
 *   CONV_ALGO_WINOGRAD  auto plus oneDNN's F(4x4,3x3) where it has it (AVX-512) and it is
 *                       faster: less exact (docs/USAGE.md, "Convolution algorithms").
 * The CUDA backend leaves the choice to cuDNN. */
enum conv_algo { CONV_ALGO_AUTO, CONV_ALGO_DIRECT, CONV_ALGO_WINOGRAD };

/* "auto", "direct", "winograd" */
const char *conv_algo_name(enum conv_algo algo);

/* The CPU backend. threads: OpenBLAS/worker threads (0 = library default). NULL + error_set
 * on failure; free with be->destroy(be).  Its convolutions are CONV_ALGO_AUTO's. */
struct backend *backend_cpu_create(int threads);

/* backend_cpu_create(threads) with the convolutions algo allows */
struct backend *backend_cpu_create_algo(int threads, enum conv_algo algo);

#ifdef __cplusplus
}
#endif
#endif
