/* nccl_emu.c — the few NCCL calls of the emulated CUDA backend (see nccl.h beside this
 * file). */
#include "nccl.h"

#include <stddef.h>

ncclResult_t ncclGetVersion(int *version)
{
    *version = 22809;
    return ncclSuccess;
}

const char *ncclGetErrorString(ncclResult_t result)
{
    return result == ncclSuccess ? "no error" : "an emulated NCCL error";
}

const char *ncclGetLastError(ncclComm_t comm)
{
    (void)comm;
    return "";
}
