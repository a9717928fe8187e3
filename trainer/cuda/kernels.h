/* kernels.h — the CUDA backend's own kernels (kernels.cu), as C launchers.
 *
 * Each launcher enqueues its kernel(s) on stream s and returns cudaGetLastError(), i.e.
 * only launch errors; faults inside a kernel surface at the next sync point.  Tensor
 * arguments are device pointers with the layouts and meanings of the struct backend slot
 * of the same name (backend.h); per-element math comes from kernel_math.h, as on the CPU.
 * Reductions are deterministic: a fixed split into chunks, summed in double in a fixed
 * order, so the same inputs give the same bits on every run. */
#ifndef DDPPROF_KERNELS_H
#define DDPPROF_KERNELS_H

#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* doubles of scratch the per-channel reductions over (n,c,hw) need */
size_t kern_channel_ws_doubles(int n, int c, int hw);

/* mean (c), invstd (c) = 1/sqrt(biased var + eps) of x (n,c,hw); ws: scratch above */
cudaError_t kern_bn_stats(cudaStream_t s, int n, int c, int hw, const float *x, float eps,
                          float *mean, float *invstd, double *ws);
/* out (c) = per-channel sum of x (n,c,hw) (the bias gradient of a convolution) */
cudaError_t kern_channel_sum(cudaStream_t s, int n, int c, int hw, const float *x, float *out,
                             double *ws);
cudaError_t kern_bn_backward_reduce(cudaStream_t s, int n, int c, int hw, const float *dy,
                                    const float *x, const float *mean, const float *invstd,
                                    float *sum_dy, float *sum_dy_xmu, float *dweight,
                                    float *dbias, double *ws);
cudaError_t kern_bn_gather_stats(cudaStream_t s, int world, int c, const float *means,
                                 const float *invstds, const float *counts, float momentum,
                                 float eps, float *running_mean, float *running_var,
                                 float *mean, float *invstd);
cudaError_t kern_bn_elemt(cudaStream_t s, int n, int c, int hw, const float *x,
                          const float *mean, const float *invstd, const float *weight,
                          const float *bias, float *y);
cudaError_t kern_bn_forward_eval(cudaStream_t s, int n, int c, int hw, const float *x,
                                 const float *running_mean, const float *running_var,
                                 float eps, const float *weight, const float *bias, float *y);
cudaError_t kern_bn_backward_elemt(cudaStream_t s, int n, int c, int hw, const float *dy,
                                   const float *x, const float *mean, const float *invstd,
                                   const float *weight, const float *sum_dy,
                                   const float *sum_dy_xmu, float count, float *dx);

cudaError_t kern_relu_forward(cudaStream_t s, size_t n, const float *x, float *y);
cudaError_t kern_relu_backward(cudaStream_t s, size_t n, const float *y, const float *dy,
                               float *dx);
/* planes = n*c; x (planes,h,w) -> y, argmax (planes,p,q) */
cudaError_t kern_maxpool_forward(cudaStream_t s, size_t planes, int h, int w, int kernel,
                                 int stride, int p, int q, const float *x, float *y,
                                 int32_t *argmax);
cudaError_t kern_maxpool_backward(cudaStream_t s, size_t planes, int h, int w, int kernel,
                                  int stride, int p, int q, const float *dy,
                                  const int32_t *argmax, float *dx);

/* y (n,k,pq) += b (k) */
cudaError_t kern_bias_add_channels(cudaStream_t s, int n, int k, size_t pq, const float *b,
                                   float *y);
/* y (n,out) = b (out) in every row */
cudaError_t kern_bias_fill_rows(cudaStream_t s, int n, int out, const float *b, float *y);
/* db (out) = column sums of dy (n,out) */
cudaError_t kern_column_sum(cudaStream_t s, int n, int out, const float *dy, float *db);

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
/* dst = km_round_amp(src, dt) */
cudaError_t kern_round_amp(cudaStream_t s, size_t n, int dt, const float *src, float *dst);
/* g *= inv_scale; *found (device int) = 1 if any result is inf or nan, else 0 */
cudaError_t kern_unscale_check(cudaStream_t s, size_t n, float *g, float inv_scale,
                               int *found);

/* *out (device int) = 1: proves this build's kernels run on the device */
cudaError_t kern_probe(cudaStream_t s, int *out);

#ifdef __cplusplus
}
#endif
#endif
