/* cuda_fp16.h — the emulation's stand-in for the CUDA header of that name: see cuda_emu.h. */
#include "cuda_emu.h"
