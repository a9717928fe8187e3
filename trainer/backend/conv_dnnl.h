/* conv_dnnl.h — the CPU backend's fast convolutions: oneDNN's JIT-generated convolution
 * kernels (AVX2, AVX-512 or AMX, whatever the machine has), run on the CPU backend's own
 * threads, each thread on its own slice of the batch.  Direct kernels, except, when
 * created with allow_winograd (--conv-algo winograd), Winograd F(4x4,3x3) for 3x3 stride-1
 * layers of at least 8x8 output pixels and 16 channels where oneDNN has it (AVX-512;
 * conv_dnnl.c gives the measurements behind the rule).
 *
 * backend_cpu.c calls these from its conv2d slots and falls back to its reference path
 * (im2col + sgemm, the oracle) where they return -1: a build without oneDNN
 * (conv_dnnl_stub.c), a shape oneDNN refuses, or a backend created with the fast path off.
 * tests/test_backend_ops.c compares the two paths (pair cpuref-vs-cpufast).
 *
 * Tensors are fp32 in the backend's layouts (x (n,c,h,w), w (k,c,r,s), y (n,k,p,q)).
 * oneDNN computes in its blocked layouts (nChw16c and the like): each slice is reordered
 * into them and back inside its thread, the weights once per call.  Each thread runs
 * oneDNN single-threaded (its OpenMP runtime is told one thread per calling thread), so
 * the library never starts threads of its own that would fight the backend's.
 *
 * Results: with direct kernels, the forward and dx of one image do not depend on the
 * slicing (Winograd's tiles were not checked for it); dw sums each
 * thread's slice in oneDNN and adds the threads' parts in thread order, so, as the
 * reference path, every result repeats bit for bit for a given thread count and slicing.
 *
 * A conv_dnnl keeps its primitives (one set per shape and slice size, created on first
 * use) and a grow-on-demand workspace: calls on one conv_dnnl must not run concurrently. */
#ifndef DDPPROF_CONV_DNNL_H
#define DDPPROF_CONV_DNNL_H

#include "backend/backend.h"
#include "backend/conv_pool.h"
#include "backend/cpu_isa.h"

struct conv_dnnl;

/* A fast path on pool (copied; pool->ctx must outlive it), or NULL + error_set saying why
 * not (this build has no oneDNN, or the library failed to start).  allow_winograd 0: direct
 * kernels only (the accuracy of PyTorch's own CPU convolutions, which are oneDNN's direct
 * ones); 1: Winograd F(4x4,3x3) too where oneDNN has it and it is faster (less exact:
 * tests/test_conv_nmse.c, docs/USAGE.md "Convolution algorithms").  cap: the backend's ISA
 * (cpu_isa.h); below the machine's, oneDNN is held to it too (unless ONEDNN_MAX_CPU_ISA or
 * DNNL_MAX_CPU_ISA is set: oneDNN's own variables win). */
struct conv_dnnl *conv_dnnl_create(const struct conv_pool *pool, int allow_winograd,
                                   enum cpu_isa cap);
void conv_dnnl_destroy(struct conv_dnnl *cd); /* NULL is a no-op */

/* 1 where oneDNN runs its Winograd F(4x4,3x3) for 3x3, stride-1 layers of at least 8x8
 * output pixels and 16 channels (its AVX-512 kernels; conv_dnnl.c says why those), 0 where
 * it runs direct kernels for them (created with allow_winograd 0, no AVX-512, or
 * DNNL_MAX_CPU_ISA below it) */
int conv_dnnl_winograd(const struct conv_dnnl *cd);

/* One line for logs and benchmarks: "oneDNN 2.6.3 (cpu isa avx512_core, omp runtime,
 * Winograd for 3x3 layers from 8x8 pixels)". */
const char *conv_dnnl_describe(const struct conv_dnnl *cd);

/* y = conv(x, w) + b (b may be NULL).  0, or -1 + error_set when oneDNN cannot run this
 * shape or fails; then y may be partly written and the caller computes it another way. */
int conv_dnnl_forward(struct conv_dnnl *cd, const struct conv2d_shape *cs, const float *x,
                      const float *w, const float *b, float *y);

/* From dy: dx = the input gradient, dw = the weight gradient (either may be NULL, both
 * overwritten).  0, or -1 + error_set as conv_dnnl_forward.  Whether a shape runs here
 * does not depend on which of dx and dw are asked for. */
int conv_dnnl_backward(struct conv_dnnl *cd, const struct conv2d_shape *cs, const float *x,
                       const float *w, const float *dy, float *dx, float *dw);

/* c = alpha op(a) op(b) + beta c, row-major (op: transposed where trans_*), on the calling
 * thread alone: oneDNN's own JIT GEMM, which uses the machine's widest vectors whatever
 * OpenBLAS was told (OPENBLAS_CORETYPE may hold it to older kernels: this project's CI
 * machines set Haswell, AVX2, half the FLOPs per cycle of their AVX-512).  0, or -1
 * (nothing written) in a build without oneDNN or when oneDNN fails: the caller runs
 * cblas_sgemm instead. */
int conv_dnnl_sgemm(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a,
                    int lda, const float *b, int ldb, float beta, float *c, int ldc);

#endif
