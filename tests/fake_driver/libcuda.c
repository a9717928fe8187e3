/* libcuda.c — a stand-in for the NVIDIA driver's libcuda.so.1 that reports one device and
 * has nothing behind it, for tests/test_cuda_lazy_binary.sh on machines without a GPU:
 * the program's device count (trainer/cuda/cuda_loader.c) sees a GPU, so `ddpprof train
 * --gpu 0` goes on to load libddpprof_cuda.so from beside the binary, whose CUDA runtime
 * then finds the driver's other entry points missing and the run fails in one line.
 * Return values are CUresult: 0 is CUDA_SUCCESS. */
int cuInit(unsigned flags);
int cuDriverGetVersion(int *version);
int cuDeviceGetCount(int *count);

int cuInit(unsigned flags)
{
    (void)flags;
    return 0;
}

int cuDriverGetVersion(int *version)
{
    *version = 99000; /* newer than any runtime the module links */
    return 0;
}

int cuDeviceGetCount(int *count)
{
    *count = 1;
    return 0;
}
