/* cublas_v2.h — the emulation's stand-in for cuBLAS: the calls the CUDA backend makes
 * (trainer/cuda/backend_cuda.c), with cuBLAS's numbers, implemented on the CPU by
 * cublas_emu.c.  cublasGemmEx sums the products in fp32 (OpenBLAS's sgemm on floats
 * staged from the operands' type), then C = alpha op(A) op(B) + beta C rounded once to C's
 * type (cuBLAS accumulates in fp32 in its own order: results agree with a GPU's to
 * rounding); each GEMM counts as one operation (cuda_emu.h emu_ops). */
#ifndef DDPPROF_CUDA_EMU_CUBLAS_H
#define DDPPROF_CUDA_EMU_CUBLAS_H

#include "cuda_emu.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct emu_cublas *cublasHandle_t;

typedef enum {
    CUBLAS_STATUS_SUCCESS = 0,
    CUBLAS_STATUS_NOT_INITIALIZED = 1,
    CUBLAS_STATUS_ALLOC_FAILED = 3,
    CUBLAS_STATUS_INVALID_VALUE = 7,
    CUBLAS_STATUS_NOT_SUPPORTED = 15,
} cublasStatus_t;

typedef enum { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1 } cublasOperation_t;

typedef enum {
    CUBLAS_DEFAULT_MATH = 0,
    CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION = 16,
} cublasMath_t;

typedef enum { CUBLAS_COMPUTE_32F = 68 } cublasComputeType_t;

typedef enum { CUBLAS_GEMM_DEFAULT = -1 } cublasGemmAlgo_t;

cublasStatus_t cublasCreate(cublasHandle_t *handle);
cublasStatus_t cublasDestroy(cublasHandle_t handle);
cublasStatus_t cublasSetStream(cublasHandle_t handle, cudaStream_t stream);
cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode);
cublasStatus_t cublasGetProperty(libraryPropertyType type, int *value);
const char *cublasGetStatusName(cublasStatus_t status);
const char *cublasGetStatusString(cublasStatus_t status);
cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa,
                            cublasOperation_t transb, int m, int n, int k, const void *alpha,
                            const void *a, cudaDataType atype, int lda, const void *b,
                            cudaDataType btype, int ldb, const void *beta, void *c,
                            cudaDataType ctype, int ldc, cublasComputeType_t compute,
                            cublasGemmAlgo_t algo);

#ifdef __cplusplus
}
#endif
#endif
