/* backend_cuda.h — what the NCCL comm needs from a CUDA backend: its device and its
 * compute stream.  Internal to the CUDA build; the rest of the program uses cuda_api.h. */
#ifndef DDPPROF_BACKEND_CUDA_H
#define DDPPROF_BACKEND_CUDA_H

#include <cuda_runtime.h>

#ifdef __cplusplus
extern "C" {
#endif

struct backend;

/* 1 if be was made by backend_cuda_create */
int backend_cuda_is(const struct backend *be);

/* The device index be runs on, and the stream every one of its slots enqueues on (a
 * non-blocking stream owned by be).  be must be a CUDA backend. */
int backend_cuda_device(const struct backend *be);
cudaStream_t backend_cuda_stream(const struct backend *be);

/* Make be's device current on the calling thread.  0 or -1 (error_set). */
int backend_cuda_bind(const struct backend *be);

#ifdef __cplusplus
}
#endif
#endif
