/* backend_cuda.h — what the NCCL comm and the convolution plans need from the CUDA
 * backend: its device and compute stream, and the device buffer that grows on demand.
 * Internal to the CUDA build; the rest of the program uses cuda_api.h. */
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

/* A device buffer on one device that grows on demand, in whole MiB; contents are not kept.
 * Work queued on stream may still use the old buffer, so reserve drains the stream before
 * freeing it.  A zeroed struct is empty.  0, or -1 (error_set) with the buffer empty. */
struct cuda_buffer {
    void *ptr;
    size_t bytes;
};
int cuda_buffer_reserve(struct cuda_buffer *b, cudaStream_t stream, int device, size_t bytes);
void cuda_buffer_free(struct cuda_buffer *b);

#ifdef __cplusplus
}
#endif
#endif
