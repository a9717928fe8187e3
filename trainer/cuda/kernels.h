/* kernels.h — the CUDA backend's own kernels (kernels.cu), as C launchers.
 *
 * Each launcher enqueues its kernel(s) on stream s and returns cudaGetLastError(), i.e.
 * only launch errors; faults inside a kernel surface at the next sync point.  Tensor
 * arguments are device pointers with the layouts and meanings of the struct backend slot
 * of the same name (backend.h); per-element math comes from kernel_math.h, as on the CPU.
 * A `dt` argument is the element type of the void * tensors (fp32, or 2-byte fp16/bf16):
 * they are read into fp32, computed on in fp32 (sums in double) and written rounded to
 * nearest even; per-channel vectors and statistics are always fp32.
 * Reductions are deterministic: a fixed split into chunks, summed in double in a fixed
 * order, so the same inputs give the same bits on every run.
 *
 * Besides nvcc, tests/cuda_emu compiles kernels.cu with the host C++ compiler to run the
 * kernels on the CPU (tests/test_kernels_emu.c): kernels.cu uses only the CUDA built-ins,
 * intrinsics and runtime calls that tests/cuda_emu/cuda_emu.h provides. */
#ifndef DDPPROF_KERNELS_H
#define DDPPROF_KERNELS_H

#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* doubles of scratch the per-channel reductions over (n,c,hw) need */
size_t kern_channel_ws_doubles(int n, int c, int hw);

/* The per-channel reductions below are one launch each (kern_bn_stats two: the mean, then
 * the squared deviations from it): the last block of each channel to finish adds the
 * chunks' partial sums and writes the results.  ws: the scratch above; done: c unsigned
 * ints, zero before the launch and left zero after it (the blocks' count of themselves,
 * per channel). */

/* Every 4-D tensor below ((n,c,hw) or (n,c,h,w)) is stored in layout lay (backend.h
 * enum layout): the CUDA backend's layout of dt. */

/* mean (c), invstd (c) = 1/sqrt(biased var + eps) of x (n,c,hw) of dt */
cudaError_t kern_bn_stats(cudaStream_t s, int n, int c, int hw, enum dtype dt, enum layout lay,
                          const void *x, float eps, float *mean, float *invstd, double *ws, unsigned *done);
/* out (c) of dt = per-channel sum of x (n,c,hw) of dt (the bias gradient of a
 * convolution) */
cudaError_t kern_channel_sum(cudaStream_t s, int n, int c, int hw, enum dtype dt,
                             enum layout lay, const void *x, void *out, double *ws, unsigned *done);
cudaError_t kern_bn_backward_reduce(cudaStream_t s, int n, int c, int hw, enum dtype dt,
                                    enum layout lay, const void *dy, const void *x, const float *mean,
                                    const float *invstd, float *sum_dy, float *sum_dy_xmu,
                                    float *dweight, float *dbias, double *ws, unsigned *done);
cudaError_t kern_bn_gather_stats(cudaStream_t s, int world, int c, const float *means,
                                 const float *invstds, const float *counts, float momentum,
                                 float eps, float *running_mean, float *running_var,
                                 float *mean, float *invstd);
cudaError_t kern_bn_elemt(cudaStream_t s, int n, int c, int hw, enum dtype dt, enum layout lay,
                          const void *x,
                          const float *mean, const float *invstd, const float *weight,
                          const float *bias, void *y);
cudaError_t kern_bn_forward_eval(cudaStream_t s, int n, int c, int hw, enum dtype dt,
                                 enum layout lay, const void *x, const float *running_mean,
                                 const float *running_var, float eps, const float *weight,
                                 const float *bias, void *y);
cudaError_t kern_bn_backward_elemt(cudaStream_t s, int n, int c, int hw, enum dtype dt,
                                   enum layout lay, const void *dy, const void *x, const float *mean,
                                   const float *invstd, const float *weight,
                                   const float *sum_dy, const float *sum_dy_xmu,
                                   const float *count, void *dx);

cudaError_t kern_relu_forward(cudaStream_t s, size_t n, enum dtype dt, const void *x, void *y);
cudaError_t kern_relu_backward(cudaStream_t s, size_t n, enum dtype dt, const void *y,
                               const void *dy, void *dx);
/* x (n,c,h,w) -> y, argmax (n,c,p,q) */
cudaError_t kern_maxpool_forward(cudaStream_t s, int n, int c, int h, int w, int kernel,
                                 int stride, int p, int q, enum dtype dt, enum layout lay,
                                 const void *x, void *y, int32_t *argmax);
cudaError_t kern_maxpool_backward(cudaStream_t s, int n, int c, int h, int w, int kernel,
                                  int stride, int p, int q, enum dtype dt, enum layout lay,
                                  const void *dy, const int32_t *argmax, void *dx);

/* x (n,c,h,w) -> y (n,c,p,q): adaptive average pooling, windows and order of summation as
 * backend.h adaptive_avgpool2d_forward */
cudaError_t kern_adaptive_avgpool_forward(cudaStream_t s, int n, int c, int h, int w, int p,
                                          int q, enum dtype dt, enum layout lay, const void *x,
                                          void *y);
/* dx (n,c,h,w) from dy (n,c,p,q): a gather per input element, in output order */
cudaError_t kern_adaptive_avgpool_backward(cudaStream_t s, int n, int c, int h, int w, int p,
                                           int q, enum dtype dt, enum layout lay, const void *dy,
                                           void *dx);
/* y (n) = a + b, all of dt; y may alias a or b */
cudaError_t kern_add(cudaStream_t s, size_t n, enum dtype dt, const void *a, const void *b,
                     void *y);

/* y (n,k,pq) += b (k), both of dt (one rounding of the fp32 sum) */
cudaError_t kern_bias_add_channels(cudaStream_t s, int n, int k, size_t pq, enum dtype dt,
                                   enum layout lay, const void *b, void *y);
/* y (n,out) = b (out) in every row, both of dt */
cudaError_t kern_bias_fill_rows(cudaStream_t s, int n, int out, enum dtype dt, const void *b,
                                void *y);
/* db (out) = column sums of dy (n,out), both of dt */
cudaError_t kern_column_sum(cudaStream_t s, int n, int out, enum dtype dt, const void *dy,
                            void *db);

/* *loss_out (device float) = mean softmax cross-entropy; row_loss: n doubles of scratch */
cudaError_t kern_softmax_xent(cudaStream_t s, int n, int c, const float *logits,
                              const int32_t *labels, float *dlogits, double *row_loss,
                              float *loss_out);
/* *count (device int) = rows whose first maximum is the label */
cudaError_t kern_count_correct(cudaStream_t s, int n, int c, const float *logits,
                               const int32_t *labels, int *count);

cudaError_t kern_scale(cudaStream_t s, size_t n, float alpha, const float *src, float *dst);
cudaError_t kern_sgd_step(cudaStream_t s, size_t n, float *param, const float *grad,
                          float *buf, float lr, float momentum, float dampening,
                          float weight_decay, int nesterov, int first);
/* Adam at step `step` (>= 1): km_adam_scalars on the host, km_adam_update per element */
cudaError_t kern_adam_step(cudaStream_t s, size_t n, float *param, const float *grad,
                           float *exp_avg, float *exp_avg_sq, double lr, double beta1,
                           double beta2, double eps, double weight_decay, long long step);
/* dst = km_round_amp(src, dt), fp32 to fp32 */
cudaError_t kern_round_amp(cudaStream_t s, size_t n, int dt, const float *src, float *dst);
/* dst (n, of to) = src (n, of from) converted (backend.h cast); the same type: a copy */
cudaError_t kern_cast(cudaStream_t s, size_t n, enum dtype from, const void *src,
                      enum dtype to, void *dst);
/* dst (n,c,hw) of to in layout lt = src of from in layout lf (backend.h convert): one
 * launch, a cast where the layouts agree */
cudaError_t kern_convert(cudaStream_t s, int n, int c, size_t hw, enum dtype from,
                         enum layout lf, const void *src, enum dtype to, enum layout lt,
                         void *dst);
/* dsts[i] (numels[i], of to) = srcs[i] (numels[i], of from) converted, i < count, in one
 * launch per KERN_CAST_LIST tensors (host arrays, passed by value); a tensor with a 4-D
 * shape in dims (backend.h cast_list; dims may be NULL) moved from layout lf to lt */
#define KERN_CAST_LIST 32
cudaError_t kern_cast_list(cudaStream_t s, int count, enum dtype from, enum layout lf,
                           const void *const *srcs, enum dtype to, enum layout lt,
                           void *const *dsts, const size_t *numels, const int *dims);
/* grads[i][j] *= inv_scale for j < numels[i], i < count, in one launch per
 * KERN_UNSCALE_LIST tensors (grads and numels are host arrays, passed by value);
 * *found (device float) = 1 if any result is inf or nan, else 0 */
#define KERN_UNSCALE_LIST 32
cudaError_t kern_unscale(cudaStream_t s, int count, float *const *grads, const size_t *numels,
                         float inv_scale, float *found);

/* *out (device int) = 1: proves this build's kernels run on the device */
cudaError_t kern_probe(cudaStream_t s, int *out);

#ifdef __cplusplus
}
#endif
#endif
