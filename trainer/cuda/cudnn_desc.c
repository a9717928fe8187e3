/* cudnn_desc.c — cuDNN descriptors and output shapes of convolution and pooling layers
 * (see cudnn_desc.h), and the host-only shape queries declared in cuda_api.h. */
#include "cuda/cudnn_desc.h"

#include "cuda/cuda_api.h"
#include "common/cuda_check.h"
#include "common/error.h"

#include <string.h>

cudnnDataType_t cudnn_dtype(enum dtype dt)
{
    switch (dt) {
    case DT_F16:
        return CUDNN_DATA_HALF;
    case DT_BF16:
        return CUDNN_DATA_BFLOAT16;
    case DT_F32:
        break;
    }
    return CUDNN_DATA_FLOAT;
}

void cudnn_conv_desc_free(struct cudnn_conv_desc *d)
{
    if (d->x)
        cudnnDestroyTensorDescriptor(d->x);
    if (d->y)
        cudnnDestroyTensorDescriptor(d->y);
    if (d->w)
        cudnnDestroyFilterDescriptor(d->w);
    if (d->conv)
        cudnnDestroyConvolutionDescriptor(d->conv);
    memset(d, 0, sizeof *d);
}

int cudnn_conv_desc_init(struct cudnn_conv_desc *d, const struct conv2d_shape *cs,
                         enum dtype dt, enum layout lay)
{
    memset(d, 0, sizeof *d);
    const cudnnDataType_t t = cudnn_dtype(dt);
    /* x, y NHWC and the filter KRSC (cuDNN's NHWC filter format), or all NCHW/KCRS */
    const cudnnTensorFormat_t f = lay == LAYOUT_NHWC ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW;
    /* fp32 data: FMA math only, so cuDNN may not pick TF32 tensor-core kernels (their
     * 10-bit mantissa would break parity with the CPU oracle); half data: tensor cores */
    const cudnnMathType_t math = dt == DT_F32 ? CUDNN_FMA_MATH : CUDNN_TENSOR_OP_MATH;
    int n, k, p, q;
    if (CHECK_CUDNN(cudnnCreateTensorDescriptor(&d->x)) ||
        CHECK_CUDNN(cudnnCreateTensorDescriptor(&d->y)) ||
        CHECK_CUDNN(cudnnCreateFilterDescriptor(&d->w)) ||
        CHECK_CUDNN(cudnnCreateConvolutionDescriptor(&d->conv)) ||
        CHECK_CUDNN(cudnnSetTensor4dDescriptor(d->x, f, t, cs->n, cs->c, cs->h, cs->w)) ||
        CHECK_CUDNN(cudnnSetFilter4dDescriptor(d->w, t, f, cs->k, cs->c, cs->r, cs->s)) ||
        CHECK_CUDNN(cudnnSetConvolution2dDescriptor(d->conv, cs->pad, cs->pad, cs->stride,
                                                    cs->stride, 1, 1, CUDNN_CROSS_CORRELATION,
                                                    CUDNN_DATA_FLOAT)) ||
        CHECK_CUDNN(cudnnSetConvolutionMathType(d->conv, math)) ||
        CHECK_CUDNN(cudnnGetConvolution2dForwardOutputDim(d->conv, d->x, d->w, &n, &k, &p, &q)))
        goto fail;
    if (n != cs->n || k != cs->k || p != cs->p || q != cs->q) {
        error_set("cuDNN computes output (%d,%d,%d,%d) for conv x (%d,%d,%d,%d) w (%d,%d,%d,%d) "
                  "pad %d stride %d, the trainer (%d,%d,%d,%d): report this shape",
                  n, k, p, q, cs->n, cs->c, cs->h, cs->w, cs->k, cs->c, cs->r, cs->s, cs->pad,
                  cs->stride, cs->n, cs->k, cs->p, cs->q);
        goto fail;
    }
    if (CHECK_CUDNN(cudnnSetTensor4dDescriptor(d->y, f, t, n, k, p, q)))
        goto fail;
    return 0;
fail:
    cudnn_conv_desc_free(d);
    return -1;
}

static int dtype_from_int(int dtype, enum dtype *dt)
{
    if (dtype < 0 || dtype > 2)
        return error_set("dtype %d: use 0 (fp32), 1 (fp16) or 2 (bf16)", dtype);
    *dt = (enum dtype)dtype;
    return 0;
}

int cuda_conv2d_output_dim(const struct conv2d_shape *cs_in, int dtype, int dims[4])
{
    struct conv2d_shape cs = *cs_in;
    enum dtype dt = DT_F32;
    if (dtype_from_int(dtype, &dt) || conv2d_shape_init(&cs))
        return -1;
    struct cudnn_conv_desc d;
    if (cudnn_conv_desc_init(&d, &cs, dt, LAYOUT_NCHW))
        return -1;
    int rc = CHECK_CUDNN(cudnnGetConvolution2dForwardOutputDim(d.conv, d.x, d.w, &dims[0],
                                                               &dims[1], &dims[2], &dims[3]));
    cudnn_conv_desc_free(&d);
    return rc;
}

int cuda_pool2d_output_dim(const struct pool2d_shape *ps, int dims[4])
{
    cudnnPoolingDescriptor_t pd = NULL;
    cudnnTensorDescriptor_t x = NULL;
    int rc = -1;
    if (ps->n < 1 || ps->c < 1 || ps->h < 1 || ps->w < 1 || ps->kernel < 1 || ps->stride < 1) {
        error_set("pooling x (%d,%d,%d,%d) kernel %d stride %d: every size must be >= 1",
                  ps->n, ps->c, ps->h, ps->w, ps->kernel, ps->stride);
        return -1;
    }
    /* max pooling, no padding: floor((h - kernel) / stride) + 1, as PyTorch's floor mode */
    if (CHECK_CUDNN(cudnnCreatePoolingDescriptor(&pd)) ||
        CHECK_CUDNN(cudnnCreateTensorDescriptor(&x)) ||
        CHECK_CUDNN(cudnnSetPooling2dDescriptor(pd, CUDNN_POOLING_MAX, CUDNN_PROPAGATE_NAN,
                                                ps->kernel, ps->kernel, 0, 0, ps->stride,
                                                ps->stride)) ||
        CHECK_CUDNN(cudnnSetTensor4dDescriptor(x, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, ps->n,
                                               ps->c, ps->h, ps->w)) ||
        CHECK_CUDNN(cudnnGetPooling2dForwardOutputDim(pd, x, &dims[0], &dims[1], &dims[2],
                                                      &dims[3])))
        goto out;
    rc = 0;
out:
    if (x)
        cudnnDestroyTensorDescriptor(x);
    if (pd)
        cudnnDestroyPoolingDescriptor(pd);
    return rc;
}
