/* backend_cpu.h — the CPU backend's test and benchmark knobs.  backend_cpu_create
 * (backend.h) is the constructor the trainer uses; these exist so tests can make the
 * worker pool split work the way no size would, and check that results do not depend on
 * the split (tests/test_backend_ops.c, pair cpu1-vs-cpuN), and compare the fast
 * convolutions with the reference ones (pair cpuref-vs-cpufast, bench/bench_conv.c). */
#ifndef DDPPROF_BACKEND_CPU_H
#define DDPPROF_BACKEND_CPU_H

#ifdef __cplusplus
extern "C" {
#endif

#include "backend/backend.h"

/* backend_cpu_create(threads), except that with chunk > 0 every parallel loop is split
 * into pieces of chunk items (elements, channels or planes; the last piece shorter) dealt
 * to the threads round-robin, however small the op, and every convolution into chunks of
 * at most chunk images.  chunk = 0 is backend_cpu_create(threads).  NULL + error_set on
 * failure; free with be->destroy(be). */
struct backend *backend_cpu_create_chunked(int threads, int chunk);

/* Which kernels a CPU backend runs where it has two: the fast ones (convolutions on oneDNN,
 * conv_dnnl.h, where this build has it; AVX-512 max pooling where the machine has it) or
 * the reference ones alone (im2col + sgemm convolutions and scalar pooling: the oracle).
 * Every other op has one implementation. */
enum cpu_path { CPU_PATH_FAST, CPU_PATH_REFERENCE };

/* backend_cpu_create_chunked(threads, chunk) with the kernels of path (CONV_ALGO_AUTO's
 * convolutions on CPU_PATH_FAST) */
struct backend *backend_cpu_create_path(int threads, int chunk, enum cpu_path path);

/* the same with the fast convolutions algo allows (backend.h; ignored on
 * CPU_PATH_REFERENCE, which runs im2col + sgemm alone) */
struct backend *backend_cpu_create_conv(int threads, int chunk, enum cpu_path path,
                                        enum conv_algo algo);

/* One line saying which kernels be (a CPU backend) runs, e.g. "convolutions: oneDNN 2.6.3
 * (cpu isa avx512_core, omp runtime); max pooling: AVX-512", and where the fast path was
 * asked for but a part of it is missing, why.  Owned by be. */
const char *backend_cpu_describe(const struct backend *be);

/* 1 when be (a CPU backend) runs any fast kernel, 0 when the reference ones alone */
int backend_cpu_is_fast(const struct backend *be);

#ifdef __cplusplus
}
#endif
#endif
