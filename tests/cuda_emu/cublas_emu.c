/* cublas_emu.c — cuBLAS's GEMM on the CPU, for the emulated CUDA backend (see cublas_v2.h
 * beside this file). */
#include "cublas_v2.h"

#include <cblas.h>
#include <stdint.h>
#include <stdlib.h>

#include "common/half.h"

struct emu_cublas {
    cudaStream_t stream;
    cublasMath_t math;
};

cublasStatus_t cublasCreate(cublasHandle_t *handle)
{
    *handle = calloc(1, sizeof **handle);
    return *handle ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_ALLOC_FAILED;
}

cublasStatus_t cublasDestroy(cublasHandle_t handle)
{
    free(handle);
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetStream(cublasHandle_t handle, cudaStream_t stream)
{
    handle->stream = stream;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode)
{
    handle->math = mode;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGetProperty(libraryPropertyType type, int *value)
{
    *value = type == MAJOR_VERSION ? 13 : type == MINOR_VERSION ? 0 : 0;
    return CUBLAS_STATUS_SUCCESS;
}

const char *cublasGetStatusName(cublasStatus_t status)
{
    switch (status) {
    case CUBLAS_STATUS_SUCCESS:
        return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED:
        return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED:
        return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE:
        return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_NOT_SUPPORTED:
        return "CUBLAS_STATUS_NOT_SUPPORTED";
    }
    return "CUBLAS_STATUS_UNKNOWN";
}

const char *cublasGetStatusString(cublasStatus_t status)
{
    return status == CUBLAS_STATUS_SUCCESS ? "success" : "an emulated cuBLAS error";
}

static float load(cudaDataType t, const void *p, size_t i)
{
    if (t == CUDA_R_16F)
        return half_f16_to_f32(((const uint16_t *)p)[i]);
    if (t == CUDA_R_16BF)
        return half_bf16_to_f32(((const uint16_t *)p)[i]);
    return ((const float *)p)[i];
}

static void store(cudaDataType t, void *p, size_t i, float v)
{
    if (t == CUDA_R_16F)
        ((uint16_t *)p)[i] = half_f32_to_f16(v);
    else if (t == CUDA_R_16BF)
        ((uint16_t *)p)[i] = half_f32_to_bf16(v);
    else
        ((float *)p)[i] = v;
}

/* column-major C (m,n) = alpha op(A) (m,k) op(B) (k,n) + beta C: the operands staged as
 * floats, their product by OpenBLAS's sgemm (fp32 sums, as cuBLAS's COMPUTE_32F), then
 * alpha and beta C in double and one rounding to C's type */
cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa,
                            cublasOperation_t transb, int m, int n, int k, const void *alpha,
                            const void *a, cudaDataType atype, int lda, const void *b,
                            cudaDataType btype, int ldb, const void *beta, void *c,
                            cudaDataType ctype, int ldc, cublasComputeType_t compute,
                            cublasGemmAlgo_t algo)
{
    (void)handle, (void)algo;
    if (m < 0 || n < 0 || k < 0 || compute != CUBLAS_COMPUTE_32F || atype != btype ||
        atype != ctype || ldc < (m ? m : 1) ||
        lda < (transa == CUBLAS_OP_N ? (m ? m : 1) : (k ? k : 1)) ||
        ldb < (transb == CUBLAS_OP_N ? (k ? k : 1) : (n ? n : 1)))
        return CUBLAS_STATUS_INVALID_VALUE;
    if (m == 0 || n == 0)
        return CUBLAS_STATUS_SUCCESS;
    float *af = malloc(((size_t)m * k + 1) * sizeof *af);
    float *bf = malloc(((size_t)k * n + 1) * sizeof *bf);
    float *cf = calloc((size_t)m * n, sizeof *cf);
    if (!af || !bf || !cf) {
        free(af), free(bf), free(cf);
        return CUBLAS_STATUS_ALLOC_FAILED;
    }
    emu_ops_library(1);
    for (int l = 0; l < k; l++) /* op(A) as column-major (m,k), op(B) as (k,n) */
        for (int i = 0; i < m; i++)
            af[i + (size_t)l * m] = load(atype, a, transa == CUBLAS_OP_N
                                                       ? (size_t)i + (size_t)l * lda
                                                       : (size_t)l + (size_t)i * lda);
    for (int j = 0; j < n; j++)
        for (int l = 0; l < k; l++)
            bf[l + (size_t)j * k] = load(btype, b, transb == CUBLAS_OP_N
                                                       ? (size_t)l + (size_t)j * ldb
                                                       : (size_t)j + (size_t)l * ldb);
    if (k > 0)
        cblas_sgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0f, af, m, bf, k,
                    0.0f, cf, m);
    const double al = *(const float *)alpha, be = *(const float *)beta;
    for (int j = 0; j < n; j++)
        for (int i = 0; i < m; i++) {
            const size_t ci = (size_t)i + (size_t)j * ldc;
            double r = al * cf[i + (size_t)j * m];
            if (be != 0.0)
                r += be * load(ctype, c, ci);
            store(ctype, c, ci, (float)r);
        }
    free(af);
    free(bf);
    free(cf);
    return CUBLAS_STATUS_SUCCESS;
}
