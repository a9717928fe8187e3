/* cuda_check.c — status codes of the CUDA libraries as one-line errors (see cuda_check.h). */
#include "common/cuda_check.h"

#include "common/error.h"

#include <string.h>

const char *cuda_check_basename(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

int cuda_check_cuda(cudaError_t e, const char *call, const char *file, int line)
{
    if (e == cudaSuccess)
        return 0;
    return error_set("%s:%d: %s: CUDA error %s (%d): %s", cuda_check_basename(file), line, call,
                     cudaGetErrorName(e), (int)e, cudaGetErrorString(e));
}

int cuda_check_cublas(cublasStatus_t s, const char *call, const char *file, int line)
{
    if (s == CUBLAS_STATUS_SUCCESS)
        return 0;
    return error_set("%s:%d: %s: cuBLAS error %s (%d): %s", cuda_check_basename(file), line,
                     call, cublasGetStatusName(s), (int)s, cublasGetStatusString(s));
}

int cuda_check_cudnn(cudnnStatus_t s, const char *call, const char *file, int line)
{
    if (s == CUDNN_STATUS_SUCCESS)
        return 0;
    char detail[256] = "";
    cudnnGetLastErrorString(detail, sizeof detail);
    for (char *p = detail; *p; p++) /* keep the message on one line */
        if (*p == '\n' || *p == '\r')
            *p = ' ';
    return error_set("%s:%d: %s: cuDNN error %s (%d)%s%s", cuda_check_basename(file), line, call,
                     cudnnGetErrorString(s), (int)s, detail[0] ? ": " : "", detail);
}

int cuda_check_nccl(ncclResult_t r, const char *call, const char *file, int line)
{
    if (r == ncclSuccess)
        return 0;
    const char *last = ncclGetLastError(NULL);
    return error_set("%s:%d: %s: NCCL error %s (%d)%s%s", cuda_check_basename(file), line, call,
                     ncclGetErrorString(r), (int)r, last && last[0] ? ": " : "",
                     last ? last : "");
}
