/* nccl.h — the emulation's stand-in for the NCCL calls the CUDA backend and cuda_check.c
 * make (versions and error strings; no collectives), implemented by nccl_emu.c. */
#ifndef DDPPROF_CUDA_EMU_NCCL_H
#define DDPPROF_CUDA_EMU_NCCL_H

#ifdef __cplusplus
extern "C" {
#endif

typedef struct emu_nccl_comm *ncclComm_t;
typedef enum { ncclSuccess = 0, ncclInternalError = 3 } ncclResult_t;

ncclResult_t ncclGetVersion(int *version);
const char *ncclGetErrorString(ncclResult_t result);
const char *ncclGetLastError(ncclComm_t comm);

#ifdef __cplusplus
}
#endif
#endif
