/* cuda_check.h — turning CUDA, cuBLAS, cuDNN and NCCL status codes into the project's
 * error path (error.h), with the call, file and line in the message.
 *
 * Each CHECK_* macro evaluates a library call and yields 0 on success, else -1 after
 * error_set("file:line: call: library error text (code N)").  Callers add the rank or the
 * op with error_wrap.  Internal to trainer/cuda/; needs the CUDA headers. */
#ifndef DDPPROF_CUDA_CHECK_H
#define DDPPROF_CUDA_CHECK_H

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>
#include <nccl.h>

#ifdef __cplusplus
extern "C" {
#endif

int cuda_check_cuda(cudaError_t e, const char *call, const char *file, int line);
int cuda_check_cublas(cublasStatus_t s, const char *call, const char *file, int line);
int cuda_check_cudnn(cudnnStatus_t s, const char *call, const char *file, int line);
int cuda_check_nccl(ncclResult_t r, const char *call, const char *file, int line);

/* file name without its directories, for messages */
const char *cuda_check_basename(const char *path);

#define CHECK_CUDA(call) cuda_check_cuda((call), #call, __FILE__, __LINE__)
#define CHECK_CUBLAS(call) cuda_check_cublas((call), #call, __FILE__, __LINE__)
#define CHECK_CUDNN(call) cuda_check_cudnn((call), #call, __FILE__, __LINE__)
#define CHECK_NCCL(call) cuda_check_nccl((call), #call, __FILE__, __LINE__)

#ifdef __cplusplus
}
#endif
#endif
