/* kernel_math.h — per-element math shared by the CPU backend and the CUDA kernels.
 *
 * Everything here is `static inline` and marked KM_HD, which is `__host__ __device__`
 * under nvcc and nothing in C, so the CPU tests exercise exactly the arithmetic the GPU
 * kernels run.  No allocation, no I/O, no globals. */
#ifndef DDPPROF_KERNEL_MATH_H
#define DDPPROF_KERNEL_MATH_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "common/half.h"

#ifdef __CUDACC__
#define KM_HD __host__ __device__
#else
#define KM_HD
#endif

/* torch.optim.SGD for one element; returns the new parameter and updates *buf.
 * d_p = g + wd * p; buf = first ? d_p : momentum * buf + (1 - dampening) * d_p;
 * d_p = nesterov ? d_p + momentum * buf : buf; p -= lr * d_p. */
static inline KM_HD float km_sgd_update(float p, float g, float *buf, float lr, float momentum,
                                        float dampening, float weight_decay, int nesterov,
                                        int first)
{
    float d_p = g;
    if (weight_decay != 0.0f)
        d_p += weight_decay * p;
    if (momentum != 0.0f) {
        float b = first ? d_p : momentum * *buf + (1.0f - dampening) * d_p;
        *buf = b;
        d_p = nesterov ? d_p + momentum * b : b;
    }
    return p - lr * d_p;
}

/* torch.optim.Adam's per-step scalars (amsgrad off), worked out on the host once per
 * step as PyTorch does in Python (doubles), then rounded to float where its kernels take a
 * float scalar.  step counts from 1. */
struct km_adam {
    float beta1, beta2;         /* exp_avg.mul_(beta1), exp_avg_sq.mul_(beta2) */
    float one_minus_beta1;      /* add_(grad, alpha=1 - beta1) */
    float one_minus_beta2;      /* addcmul_(grad, grad, value=1 - beta2) */
    float eps, weight_decay;
    float neg_step_size;        /* -lr / (1 - beta1^step) */
    float bias_correction2_sqrt; /* sqrt(1 - beta2^step) */
};

static inline void km_adam_scalars(double lr, double beta1, double beta2, double eps,
                                   double weight_decay, long long step, struct km_adam *a)
{
    const double bc1 = 1.0 - pow(beta1, (double)step), bc2 = 1.0 - pow(beta2, (double)step);
    a->beta1 = (float)beta1;
    a->beta2 = (float)beta2;
    a->one_minus_beta1 = (float)(1.0 - beta1);
    a->one_minus_beta2 = (float)(1.0 - beta2);
    a->eps = (float)eps;
    a->weight_decay = (float)weight_decay;
    a->neg_step_size = (float)-(lr / bc1);
    a->bias_correction2_sqrt = (float)sqrt(bc2);
}

/* torch.optim.Adam (_single_tensor_adam, PyTorch 1.13) for one element, in its order of
 * operations: g += wd * p; m = m * beta1 + (1 - beta1) * g; v = v * beta2 + (1 - beta2) * g
 * * g; p += (-step_size * m) / (sqrt(v) / sqrt(bc2) + eps).  Returns the new parameter and
 * updates *m and *v. */
static inline KM_HD float km_adam_update(float p, float g, float *m, float *v,
                                         const struct km_adam *a)
{
    if (a->weight_decay != 0.0f)
        g = g + a->weight_decay * p;
    const float mm = *m * a->beta1 + a->one_minus_beta1 * g;
    const float vv = *v * a->beta2 + a->one_minus_beta2 * g * g;
    *m = mm;
    *v = vv;
    const float denom = sqrtf(vv) / a->bias_correction2_sqrt + a->eps;
    return p + a->neg_step_size * mm / denom;
}

/* batch norm backward for one element (see backend.h batchnorm_backward_elemt) */
static inline KM_HD float km_bn_backward_elemt(float dy, float x, float mean, float invstd,
                                               float weight, float mean_dy, float mean_dy_xmu)
{
    return (dy - mean_dy - (x - mean) * invstd * invstd * mean_dy_xmu) * invstd * weight;
}

/* Autocast emulation: x rounded to the nearest fp16 (dt 1) or bf16 (dt 2) value, RNE,
 * kept in fp32; dt 0 returns x.  Values beyond the fp16 range become +-inf, as a real
 * cast does: that is how an overflow reaches the GradScaler. */
static inline KM_HD float km_round_amp(float x, int dt)
{
    if (dt == 1)
        return half_f16_to_f32(half_f32_to_f16(x));
    if (dt == 2)
        return half_bf16_to_f32(half_f32_to_bf16(x));
    return x;
}

/* GradScaler's unscale of one gradient element: g * inv_scale; *found_inf becomes 1 when
 * the result is not finite (inf or nan), as torch._amp_foreach_non_finite_check_and_unscale_. */
static inline KM_HD float km_unscale(float g, float inv_scale, int *found_inf)
{
    float v = g * inv_scale;
    if (!(v - v == 0.0f)) /* false for inf and nan; no isfinite() so nvcc and C agree */
        *found_inf = 1;
    return v;
}

/* SyncBatchNorm's merge of `world` ranks' (mean, invstd, count) for channel ch, as
 * torch.batch_norm_gather_stats_with_counts (Chan's parallel variance, in double): the
 * global mean and invstd, and the running statistics updated with momentum and the
 * unbiased variance (a single element keeps the biased one).  Ranks with count <= 0 are
 * skipped; with no elements at all the running statistics stay as they are.  means and
 * invstds are (world, c) row-major; running_* may be NULL. */
static inline KM_HD void km_bn_gather_channel(int world, int c, int ch, const float *means,
                                              const float *invstds, const float *counts,
                                              float momentum, float eps, float *running_mean,
                                              float *running_var, float *mean, float *invstd)
{
    double avg = 0.0, var_n = 0.0, total = 0.0;
    for (int r = 0; r < world; r++) {
        const double cnt = counts[r];
        if (!(cnt > 0.0))
            continue;
        const double m = means[(size_t)r * c + ch];
        const double is = invstds[(size_t)r * c + ch];
        const double v = 1.0 / (is * is) - eps;
        const double f = 1.0 / (total + cnt);
        const double d = avg - m;
        var_n += v * cnt + d * d * total * cnt * f;
        avg = total * f * avg + cnt * f * m;
        total += cnt;
    }
    const double var = total > 0.0 ? var_n / total : 0.0;
    mean[ch] = (float)avg;
    invstd[ch] = (float)(1.0 / sqrt(var + eps));
    if (!(total > 0.0))
        return;
    if (running_mean)
        running_mean[ch] = (float)((1.0 - momentum) * running_mean[ch] + momentum * avg);
    if (running_var) {
        const double unbiased = total > 1.0 ? var_n / (total - 1.0) : var;
        running_var[ch] = (float)((1.0 - momentum) * running_var[ch] + momentum * unbiased);
    }
}

#endif
