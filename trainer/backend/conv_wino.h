/* conv_wino.h — the CPU backend's own Winograd convolution, F(2x2,3x3), for the 3x3,
 * stride-1, pad-1 layers where it is faster than oneDNN's kernels (conv_dnnl.h): those
 * whose output is too small for oneDNN's F(4x4,3x3) (ResNet18's 512 channels at 4x4), and
 * all of them where oneDNN runs no Winograd (machines without AVX-512, builds without
 * oneDNN, and --conv-algo auto, the default, which keeps to PyTorch's accuracy: this
 * module's error per op stays within 1.7x of PyTorch float32's, tests/test_conv_nmse.c).
 *
 * Per 2x2 output tile and channel, a 4x4 input tile d is transformed (V = B^T d B), each
 * 3x3 filter g once per call (U = G g G^T), and the 16 elements of a tile become 16
 * independent GEMMs over channels (OpenBLAS sgemm, single-threaded on each of the
 * backend's threads), whose outputs are transformed back (Y = A^T M A): 16 products per
 * 4 outputs instead of 36, 2.25x fewer multiplications than direct convolution (Lavin
 * and Gray, "Fast Algorithms for Convolutional Neural Networks", 2016).
 *   dx: the same with dy as input and the filters rotated by 180 degrees and transposed,
 *       whose transforms are U with rows and columns 0 and 3 of each 4x4 element swapped;
 *   dw: the adjoint, dw = G^T [sum over tiles (A dy A^T) (.) (B^T d B)] G, a GEMM over
 *       tiles per element.
 * The transforms' coefficients are 0, +-1 and +-1/2: the rounding error stays within a
 * few times that of direct summation (tests/test_backend_ops.c, cpuref-vs-cpufast).
 *
 * Threads: each thread takes a contiguous run of images (the split of conv_dnnl.c, chunk
 * included) and works through it in blocks that fit a core's cache; dw sums each thread's
 * part and adds the parts in thread order: results repeat bit for bit for a given thread
 * count and split.  A conv_wino keeps a grow-on-demand workspace: calls on one must not
 * run concurrently. */
#ifndef DDPPROF_CONV_WINO_H
#define DDPPROF_CONV_WINO_H

#include "backend/backend.h"
#include "backend/conv_pool.h"

struct conv_wino;

/* on pool (copied; pool->ctx must outlive it), or NULL + error_set (out of memory) */
struct conv_wino *conv_wino_create(const struct conv_pool *pool);
void conv_wino_destroy(struct conv_wino *cw); /* NULL is a no-op */

/* 1 where conv_wino runs cs: 3x3, stride 1, pad 1, at least 16 channels in and out, and
 * either at most 4x4 pixels or other_winograd 0 (the caller's other fast path, oneDNN,
 * has no Winograd of its own for larger ones on this machine: conv_dnnl_winograd).  The
 * measurements behind the rule are in conv_wino.c. */
int conv_wino_takes(const struct conv2d_shape *cs, int other_winograd);

/* y = conv(x, w) + b (b may be NULL) for a shape conv_wino_takes (asserted by the caller);
 * 0, or -1 + error_set (out of memory: then nothing is written and the caller computes y
 * another way) */
int conv_wino_forward(struct conv_wino *cw, const struct conv2d_shape *cs, const float *x,
                      const float *w, const float *b, float *y);

/* dx and dw (either may be NULL, both overwritten) from dy; 0, or -1 + error_set as above */
int conv_wino_backward(struct conv_wino *cw, const struct conv2d_shape *cs, const float *x,
                       const float *w, const float *dy, float *dx, float *dw);

#endif
