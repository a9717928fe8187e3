/* conv_dnnl_stub.c — conv_dnnl.h in a build without oneDNN: there is no fast path, and the
 * CPU backend runs its reference convolutions, and its own Winograd (conv_wino.c) for the
 * 3x3 stride-1 layers (CMake said so when it configured). */
#include "backend/conv_dnnl.h"

#include "common/error.h"

struct conv_dnnl *conv_dnnl_create(const struct conv_pool *pool, int allow_winograd,
                                   enum cpu_isa cap)
{
    (void)pool;
    (void)allow_winograd;
    (void)cap;
    return error_set("this ddpprof was built without oneDNN (CMake found no usable libdnnl, or "
                     "-DDDPPROF_DNNL=OFF): the CPU backend runs its reference convolutions (and its "
                     "own Winograd for 3x3 stride-1 layers); "
                     "install libdnnl-dev (or run scripts/setup) and rebuild for the fast ones"),
           NULL;
}

void conv_dnnl_destroy(struct conv_dnnl *cd) { (void)cd; }

int conv_dnnl_winograd(const struct conv_dnnl *cd)
{
    (void)cd;
    return 0;
}

const char *conv_dnnl_describe(const struct conv_dnnl *cd)
{
    (void)cd;
    return "none";
}

int conv_dnnl_forward(struct conv_dnnl *cd, const struct conv2d_shape *cs, const float *x,
                      const float *w, const float *b, float *y)
{
    (void)cd, (void)cs, (void)x, (void)w, (void)b, (void)y;
    return error_set("no oneDNN in this build");
}

int conv_dnnl_backward(struct conv_dnnl *cd, const struct conv2d_shape *cs, const float *x,
                       const float *w, const float *dy, float *dx, float *dw)
{
    (void)cd, (void)cs, (void)x, (void)w, (void)dy, (void)dx, (void)dw;
    return error_set("no oneDNN in this build");
}

int conv_dnnl_sgemm(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a,
                    int lda, const float *b, int ldb, float beta, float *c, int ldc)
{
    (void)trans_a, (void)trans_b, (void)m, (void)n, (void)k, (void)alpha, (void)a, (void)lda;
    (void)b, (void)ldb, (void)beta, (void)c, (void)ldc;
    return -1;
}
