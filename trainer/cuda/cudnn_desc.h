/* cudnn_desc.h — cuDNN descriptors for the trainer's convolution shapes.
 *
 * One place builds the tensor, filter and convolution descriptors of a struct
 * conv2d_shape (NCHW, PyTorch's cross-correlation, square padding and stride), so the
 * backend and the host-side tests use the same code.  Descriptor setup and cuDNN's
 * output-shape query need no device and no cuDNN handle.  Internal to trainer/cuda/. */
#ifndef DDPPROF_CUDNN_DESC_H
#define DDPPROF_CUDNN_DESC_H

#include <cudnn.h>

#include "backend/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

struct cudnn_conv_desc {
    cudnnTensorDescriptor_t x, y;   /* (n,c,h,w), (n,k,p,q), NCHW or NHWC */
    cudnnFilterDescriptor_t w;      /* (k,c,r,s), stored KCRS or KRSC */
    cudnnConvolutionDescriptor_t conv;
};

/* Create and set the descriptors of cs (p and q already filled by conv2d_shape_init) for
 * element type dt of x, w and y, all three in layout lay (NHWC: the filter KRSC, cuDNN's
 * CUDNN_TENSOR_NHWC filter format, as torch.channels_last stores a weight), and check that cuDNN's output shape is (n,k,p,q).
 * Accumulation is fp32 for every dt (the convolution descriptor's compute type: cuDNN's
 * PSEUDO_HALF and PSEUDO_BFLOAT16 configurations for the half types, on tensor cores,
 * CUDNN_TENSOR_OP_MATH); fp32 data starts strict fp32 (CUDNN_FMA_MATH, no TF32), which
 * conv_plan.c changes only with --tf32 on.  0, or -1 (error_set) with nothing left
 * allocated. */
int cudnn_conv_desc_init(struct cudnn_conv_desc *d, const struct conv2d_shape *cs,
                         enum dtype dt, enum layout lay);

/* Destroy what init created (a zeroed struct is fine). */
void cudnn_conv_desc_free(struct cudnn_conv_desc *d);

/* the cuDNN data type of dt */
cudnnDataType_t cudnn_dtype(enum dtype dt);

#ifdef __cplusplus
}
#endif
#endif
