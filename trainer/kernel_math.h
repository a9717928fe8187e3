/* kernel_math.h — per-element math shared by the CPU backend and the CUDA kernels.
 *
 * Everything here is `static inline` and marked KM_HD, which is `__host__ __device__`
 * under nvcc and nothing in C, so the CPU tests exercise exactly the arithmetic the GPU
 * kernels run.  No allocation, no I/O, no globals. */
#ifndef DDPPROF_KERNEL_MATH_H
#define DDPPROF_KERNEL_MATH_H

#ifdef __CUDACC__
#define KM_HD __host__ __device__ __forceinline__
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

#endif
