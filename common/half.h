/* half.h — fp16 and bf16 conversions as bit patterns, usable from C and from CUDA.
 *
 * Shared by the backends' autocast rounding (trainer/backend/kernel_math.h), the shm comm's
 * half-precision sums and the safetensors reader and writer.  Everything is `static inline`
 * and marked HALF_HD, `__host__ __device__` under nvcc and nothing in C. */
#ifndef DDPPROF_HALF_H
#define DDPPROF_HALF_H

#include <stdint.h>

#ifdef __CUDACC__
#define HALF_HD __host__ __device__
#else
#define HALF_HD
#endif

/* --- fp16 / bf16 conversions (IEEE binary16 and bfloat16, as bit patterns) ---
 * Pure bit manipulation: float -> half rounds to nearest, ties to even (as a hardware
 * cvt.rn), including subnormal results and overflow to inf (|x| >= 65520 for fp16); NaN stays
 * NaN (made quiet, sign and top payload bits kept); half -> float is exact.  No dependence on
 * the FPU rounding mode, _Float16 or cuda_fp16.h, so C and CUDA give the same bits. */
static inline HALF_HD uint32_t half_f32_bits(float f)
{
#ifdef __CUDA_ARCH__
    return __float_as_uint(f);
#else
    union { float f; uint32_t u; } v; /* type punning through a union: defined in C */
    v.f = f;
    return v.u;
#endif
}

static inline HALF_HD float half_bits_f32(uint32_t u)
{
#ifdef __CUDA_ARCH__
    return __uint_as_float(u);
#else
    union { float f; uint32_t u; } v;
    v.u = u;
    return v.f;
#endif
}

static inline HALF_HD uint16_t half_f32_to_f16(float f)
{
    uint32_t x = half_f32_bits(f);
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

static inline HALF_HD float half_f16_to_f32(uint16_t h)
{
    uint32_t sign = ((uint32_t)h & 0x8000u) << 16;
    uint32_t e = ((uint32_t)h >> 10) & 0x1fu;
    uint32_t m = (uint32_t)h & 0x3ffu;
    if (e == 0x1fu) /* inf, NaN (payload kept) */
        return half_bits_f32(sign | 0x7f800000u | (m << 13));
    if (e == 0) {
        if (m == 0)
            return half_bits_f32(sign);
        e = 113; /* subnormal: normalise m * 2^-24 */
        while (!(m & 0x400u)) {
            m <<= 1;
            e--;
        }
        return half_bits_f32(sign | (e << 23) | ((m & 0x3ffu) << 13));
    }
    return half_bits_f32(sign | ((e + 112u) << 23) | (m << 13));
}

static inline HALF_HD uint16_t half_f32_to_bf16(float f)
{
    uint32_t x = half_f32_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) /* NaN: quiet, sign and top payload bits kept */
        return (uint16_t)((x >> 16) | 0x0040u);
    x += 0x7fffu + ((x >> 16) & 1u); /* round to nearest even; overflow carries into inf */
    return (uint16_t)(x >> 16);
}

static inline HALF_HD float half_bf16_to_f32(uint16_t b)
{
    return half_bits_f32((uint32_t)b << 16);
}

#endif
