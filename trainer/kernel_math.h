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

/* batch norm backward for one element (see backend.h batchnorm_backward_elemt) */
static inline KM_HD float km_bn_backward_elemt(float dy, float x, float mean, float invstd,
                                               float weight, float mean_dy, float mean_dy_xmu)
{
    return (dy - mean_dy - (x - mean) * invstd * invstd * mean_dy_xmu) * invstd * weight;
}

/* --- fp16 / bf16 conversions (IEEE binary16 and bfloat16, as bit patterns) ---
 * Pure bit manipulation: float -> half rounds to nearest, ties to even (as a hardware
 * cvt.rn), including subnormal results and overflow to inf (|x| >= 65520 for fp16); NaN stays
 * NaN (made quiet, sign and top payload bits kept); half -> float is exact.  No dependence on
 * the FPU rounding mode, _Float16 or cuda_fp16.h, so C and CUDA give the same bits. */
#include <stdint.h>

static inline KM_HD uint32_t km_f32_bits(float f)
{
#ifdef __CUDA_ARCH__
    return __float_as_uint(f);
#else
    union { float f; uint32_t u; } v; /* type punning through a union: defined in C */
    v.f = f;
    return v.u;
#endif
}

static inline KM_HD float km_bits_f32(uint32_t u)
{
#ifdef __CUDA_ARCH__
    return __uint_as_float(u);
#else
    union { float f; uint32_t u; } v;
    v.u = u;
    return v.f;
#endif
}

static inline KM_HD uint16_t km_f32_to_f16_bits(float f)
{
    uint32_t x = km_f32_bits(f);
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u) /* NaN: quiet, top 10 payload bits kept */
        return (uint16_t)(sign | 0x7e00u | ((ax >> 13) & 0x3ffu));
    if (ax >= 0x477ff000u) /* >= 65520 = 65504 + half an ulp: the tie goes to even, i.e. inf */
        return (uint16_t)(sign | 0x7c00u);
    if (ax >= 0x38800000u) { /* >= 2^-14: a normal half */
        ax += 0xfffu + ((ax >> 13) & 1u); /* round to nearest even at bit 13 */
        ax -= 112u << 23;                 /* rebias the exponent from 127 to 15 */
        return (uint16_t)(sign | (ax >> 13));
    }
    if (ax <= 0x33000000u) /* <= 2^-25, half the smallest subnormal: rounds to (signed) zero */
        return (uint16_t)sign;
    /* subnormal half: m * 2^-24 with m = round(|f| * 2^24); |f| = mant * 2^(e-150) */
    uint32_t e = ax >> 23; /* 102..112 */
    uint32_t mant = (ax & 0x7fffffu) | 0x800000u;
    uint32_t shift = 126u - e; /* 14..24 */
    uint32_t m = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1u);
    uint32_t halfway = 1u << (shift - 1u);
    if (rem > halfway || (rem == halfway && (m & 1u)))
        m++; /* may carry into 0x400: the smallest normal, still the right encoding */
    return (uint16_t)(sign | m);
}

static inline KM_HD float km_f16_bits_to_f32(uint16_t h)
{
    uint32_t sign = ((uint32_t)h & 0x8000u) << 16;
    uint32_t e = ((uint32_t)h >> 10) & 0x1fu;
    uint32_t m = (uint32_t)h & 0x3ffu;
    if (e == 0x1fu) /* inf, NaN (payload kept) */
        return km_bits_f32(sign | 0x7f800000u | (m << 13));
    if (e == 0) {
        if (m == 0)
            return km_bits_f32(sign);
        e = 113; /* subnormal: normalise m * 2^-24 */
        while (!(m & 0x400u)) {
            m <<= 1;
            e--;
        }
        return km_bits_f32(sign | (e << 23) | ((m & 0x3ffu) << 13));
    }
    return km_bits_f32(sign | ((e + 112u) << 23) | (m << 13));
}

static inline KM_HD uint16_t km_f32_to_bf16_bits(float f)
{
    uint32_t x = km_f32_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) /* NaN: quiet, sign and top payload bits kept */
        return (uint16_t)((x >> 16) | 0x0040u);
    x += 0x7fffu + ((x >> 16) & 1u); /* round to nearest even; overflow carries into inf */
    return (uint16_t)(x >> 16);
}

static inline KM_HD float km_bf16_bits_to_f32(uint16_t b)
{
    return km_bits_f32((uint32_t)b << 16);
}

/* Autocast emulation: x rounded to the nearest fp16 (dt 1) or bf16 (dt 2) value, RNE,
 * kept in fp32; dt 0 returns x.  Values beyond the fp16 range become +-inf, as a real
 * cast does: that is how an overflow reaches the GradScaler. */
static inline KM_HD float km_round_amp(float x, int dt)
{
    if (dt == 1)
        return km_f16_bits_to_f32(km_f32_to_f16_bits(x));
    if (dt == 2)
        return km_bf16_bits_to_f32(km_f32_to_bf16_bits(x));
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
