/* loader_emu.c — cuda_api.h's two entries that the program's loader answers itself
 * (trainer/cuda/cuda_loader.c), for the emulated CUDA backend: a build with CUDA, one
 * device (cuda_emu.h). */
#include "cuda/cuda_api.h"

int cuda_build_enabled(void) { return 1; }

int cuda_device_count(void) { return 1; }
