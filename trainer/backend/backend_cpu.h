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

struct backend;

/* backend_cpu_create(threads), except that with chunk > 0 every parallel loop is split
 * into pieces of chunk items (elements, channels or planes; the last piece shorter) dealt
 * to the threads round-robin, however small the op, and every convolution into chunks of
 * at most chunk images.  chunk = 0 is backend_cpu_create(threads).  NULL + error_set on
 * failure; free with be->destroy(be). */
struct backend *backend_cpu_create_chunked(int threads, int chunk);

/* Which convolutions a CPU backend runs: the fast path (conv_dnnl.h: oneDNN, where this
 * build has it, else the reference) or the reference (im2col + sgemm, the oracle) alone. */
enum cpu_conv_path { CPU_CONV_FAST, CPU_CONV_REFERENCE };

/* backend_cpu_create_chunked(threads, chunk) with the convolutions of path */
struct backend *backend_cpu_create_path(int threads, int chunk, enum cpu_conv_path path);

/* One line saying which convolutions be (a CPU backend) runs: "oneDNN 2.6.3 (cpu isa
 * avx512_core, omp runtime)", or "reference (im2col + OpenBLAS sgemm)" and, where the
 * fast path was asked for, why not.  Owned by be. */
const char *backend_cpu_conv_describe(const struct backend *be);

/* 1 when be (a CPU backend) runs the fast convolutions, 0 when the reference alone */
int backend_cpu_conv_fast(const struct backend *be);

#ifdef __cplusplus
}
#endif
#endif
