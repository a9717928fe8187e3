/* cuda.h — constructors of the CUDA backend and the NCCL comm.
 *
 * Defined in trainer/cuda/ when the build found the CUDA toolkit (with cuDNN, NCCL,
 * CUPTI), else by stubs.c, which fail with one clear line.  Callers never #ifdef. */
#ifndef DDPPROF_CUDA_H
#define DDPPROF_CUDA_H

#ifdef __cplusplus
extern "C" {
#endif

struct backend;
struct comm;
struct store;

/* 1 when this build has the CUDA backend */
int cuda_build_enabled(void);

/* Number of visible CUDA devices, 0 when there is no driver or device, -1 (error_set) only
 * for a build without CUDA. */
int cuda_device_count(void);

/* The CUDA backend on device `device` (an index among the visible devices).  NULL +
 * error_set (no CUDA build, no such device, no driver). */
struct backend *backend_cuda_create(int device);

/* The NCCL comm for rank/world: rank 0 creates the unique id and publishes it in the
 * store under "nccl_id", the others read it.  be is this rank's CUDA backend (its compute
 * stream orders the collectives).  NULL + error_set. */
struct comm *comm_nccl_create(struct backend *be, struct store *store, int rank, int world,
                              int timeout_ms);

#ifdef __cplusplus
}
#endif
#endif
