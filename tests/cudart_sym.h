/* cudart_sym.h — a CUDA runtime entry point of the libcudart this process has loaded.
 *
 * libddpprof_cuda.so is loaded RTLD_LOCAL (trainer/cuda/cuda_loader.c) and brings
 * libcudart with it, so libcudart is not in the global scope: dlsym(RTLD_DEFAULT, ...) and
 * dlsym(RTLD_NEXT, ...) from a test executable do not see it.  cudart_sym finds the mapped
 * libcudart (any path: the toolkit's or a pip wheel's), opens it by that path with
 * RTLD_NOLOAD (so nothing new is loaded) and looks name up in it.  Compiles in every build
 * (plain libdl); without CUDA nothing is found. */
#ifndef DDPPROF_TEST_CUDART_SYM_H
#define DDPPROF_TEST_CUDART_SYM_H

/* the address of name in the loaded libcudart, or NULL when no libcudart is mapped or it
 * lacks name */
void *cudart_sym(const char *name);

/* the path of the loaded libcudart (as the dynamic loader has it), or NULL */
const char *cudart_path(void);

#endif
