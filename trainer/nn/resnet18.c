/* resnet18.c — the ResNet18 of the distributed-training example (seed 002), for 3x32x32
 * CIFAR-10 images:
 *   conv1       = Conv2d(3, W, 3, pad 1, no bias) BatchNorm2d(W) ReLU
 *   conv2..conv5 = two residual blocks each (resblock.h) of W, 2W, 4W, 8W channels, the
 *                 first block of conv3..conv5 with stride 2
 *   avg_pool    = AdaptiveAvgPool2d((1, 1))
 *   dense_layer = Linear(8W, 10)
 * W = 64 is the example's network (11,173,962 parameters); a smaller W keeps the same
 * structure and names for tests.  PyTorch's names: conv1.0.weight, conv1.1.running_var,
 * conv2.0.residual_function.0.weight, conv3.0.shortcut.1.bias, dense_layer.weight, ... */
#include "nn/batchnorm.h"
#include "nn/conv.h"
#include "nn/linear.h"
#include "nn/model.h"
#include "nn/resblock.h"

#include "common/error.h"
#include "common/rng.h"

#include <stdio.h>
#include <stdlib.h>

#define RESNET_BLOCKS 8
#define RESNET_CLASSES 10

struct resnet18 {
    int width;
    struct conv2d conv1;      /* conv1.0 */
    struct batchnorm bn1;     /* conv1.1 */
    struct resblock blocks[RESNET_BLOCKS]; /* conv2.0, conv2.1, conv3.0, ..., conv5.1 */
    struct linear fc;         /* dense_layer */
    enum dtype dt;            /* the activations' type: DT_F32, or autocast's half type */
    int cap;                  /* batch capacity of the buffers below */
    int n;                    /* batch of the last forward */
    int fh, fw;               /* the last block's output plane */
    struct conv2d_shape cs1;
    const void *x;            /* conv1's input in the last forward (x itself, or x_cast) */
    /* of dt: */
    void *c0, *a0;            /* conv1 out (n,W,32,32), BN+ReLU (same) */
    void *pooled;             /* (n,8W) */
    void *g[4];               /* backward scratch, scratch_elems each */
    size_t scratch_elems;
    size_t most;              /* the last forward's largest activation (elements) */
    void *x_cast;             /* autocast: the input cast to dt */
    void *fc_out, *dfc_out;   /* autocast: dense_layer's output (n,10) and its gradient */
    float *logits;            /* (n,10) fp32 */
    int l_conv1, l_bn1, l_relu1, l_pool, l_fc; /* in the model's layer list (the blocks
                                                  keep their own) */
};

static void resnet_free_buffers(struct backend *be, struct resnet18 *r)
{
    void **bufs[] = {&r->c0, &r->a0, &r->pooled, &r->g[0], &r->g[1], &r->g[2], &r->g[3],
                     &r->x_cast, &r->fc_out, &r->dfc_out, (void **)&r->logits};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) {
        be->free(be, *bufs[i]);
        *bufs[i] = NULL;
    }
    r->cap = 0;
    r->scratch_elems = 0;
}

/* the stem's buffers and the head's for batch n of (c,h,w) images; 0 or -1 */
static int resnet_reserve(struct model *m, struct resnet18 *r, int n)
{
    if (n <= r->cap)
        return 0;
    struct backend *be = m->be;
    resnet_free_buffers(be, r);
    const enum dtype dt = r->dt;
    const size_t plane = (size_t)m->in_h * m->in_w, stem = (size_t)n * r->width * plane;
    const size_t feat = (size_t)n * 8 * r->width;
    r->c0 = backend_alloc_elems(be, stem, dt);
    r->a0 = backend_alloc_elems(be, stem, dt);
    r->pooled = backend_alloc_elems(be, feat, dt);
    r->logits = be->alloc(be, (size_t)n * RESNET_CLASSES * sizeof(float));
    int ok = r->c0 && r->a0 && r->pooled && r->logits;
    if (ok && dt != DT_F32) {
        r->x_cast = backend_alloc_elems(be, (size_t)n * m->in_c * plane, dt);
        r->fc_out = backend_alloc_elems(be, (size_t)n * RESNET_CLASSES, dt);
        r->dfc_out = backend_alloc_elems(be, (size_t)n * RESNET_CLASSES, dt);
        ok = r->x_cast && r->fc_out && r->dfc_out;
    }
    if (!ok) {
        resnet_free_buffers(be, r);
        return error_wrap("resnet18: activations for batch %d", n);
    }
    r->cap = n;
    return 0;
}

/* backward scratch: four buffers of `elems` (the largest activation or gradient) */
static int resnet_reserve_scratch(struct backend *be, struct resnet18 *r, size_t elems)
{
    if (elems <= r->scratch_elems)
        return 0;
    for (int i = 0; i < 4; i++) {
        be->free(be, r->g[i]);
        r->g[i] = NULL;
    }
    r->scratch_elems = 0;
    for (int i = 0; i < 4; i++)
        if (!(r->g[i] = backend_alloc_elems(be, elems, r->dt)))
            return error_wrap("resnet18: backward scratch of %zu elements", elems);
    r->scratch_elems = elems;
    return 0;
}

static int resnet_forward(struct model *m, const float *x, int n, int train,
                          const float **logits)
{
    struct resnet18 *r = m->impl;
    struct backend *be = m->be;
    if (resnet_reserve(m, r, n) || conv2d_shape_for(&r->conv1, n, m->in_h, m->in_w, &r->cs1))
        return -1;
    r->n = n;
    const enum dtype dt = r->dt;
    r->x = x;
    if (dt != DT_F32) { /* autocast casts the input of the first conv (into the layout of
                           the backend's half tensors), and the weights */
        const int dims[4] = {n, m->in_c, m->in_h, m->in_w};
        be->convert(be, dims, DT_F32, LAYOUT_NCHW, x, dt, be->layout(be, dt), r->x_cast);
        r->x = r->x_cast;
        params_cast_half(&m->params);
    }
    const int hw = r->cs1.p * r->cs1.q;
    size_t most = (size_t)n * r->width * hw;
    const struct layer_list *L = &m->layers;
    layer_enter(L, r->l_conv1, LAYER_FORWARD);
    conv2d_forward(be, &r->conv1, &r->cs1, r->x, r->c0);
    layer_leave(L, r->l_conv1, LAYER_FORWARD);
    layer_enter(L, r->l_bn1, LAYER_FORWARD);
    if (batchnorm_forward(be, &r->bn1, n, hw, r->c0, r->a0, train))
        return -1;
    layer_leave(L, r->l_bn1, LAYER_FORWARD);
    layer_enter(L, r->l_relu1, LAYER_FORWARD);
    be->relu_forward(be, most, dt, r->a0, r->a0);
    layer_leave(L, r->l_relu1, LAYER_FORWARD);

    const void *cur = r->a0;
    int h = r->cs1.p, w = r->cs1.q;
    for (int i = 0; i < RESNET_BLOCKS; i++) {
        struct resblock *b = &r->blocks[i];
        if (resblock_forward(be, b, cur, n, h, w, train, &cur))
            return -1;
        h = b->p;
        w = b->q;
        const size_t out = (size_t)n * b->out * h * w;
        most = out > most ? out : most;
    }
    r->fh = h;
    r->fw = w;
    const int feat = 8 * r->width;
    layer_enter(L, r->l_pool, LAYER_FORWARD);
    /* (n,feat,1,1): the same in either layout, so the flatten into fc needs no convert */
    be->adaptive_avgpool2d_forward(be, n, feat, h, w, 1, 1, dt, cur, r->pooled);
    layer_leave(L, r->l_pool, LAYER_FORWARD);
    layer_enter(L, r->l_fc, LAYER_FORWARD);
    if (dt == DT_F32) {
        linear_forward(be, &r->fc, n, r->pooled, r->logits);
        layer_leave(L, r->l_fc, LAYER_FORWARD);
    } else { /* the loss is autocast's fp32 op: it casts the logits to fp32 */
        linear_forward(be, &r->fc, n, r->pooled, r->fc_out);
        layer_leave(L, r->l_fc, LAYER_FORWARD);
        be->cast(be, (size_t)n * RESNET_CLASSES, dt, r->fc_out, DT_F32, r->logits);
    }
    /* the backward's scratch, sized by the shapes just seen (so backward allocates
     * nothing in a steady state) */
    r->most = most;
    if (train && resnet_reserve_scratch(be, r, most))
        return -1;
    *logits = r->logits;
    return 0;
}

static int resnet_backward(struct model *m, const float *dlogits, const struct grad_hook *hook)
{
    struct resnet18 *r = m->impl;
    struct backend *be = m->be;
    const int n = r->n, feat = 8 * r->width;
    const enum dtype dt = r->dt;
    if (resnet_reserve_scratch(be, r, r->most)) /* a no-op after a training forward */
        return -1;
    const void *dfc = dlogits;
    if (dt != DT_F32) { /* the backward of the logits' cast to fp32: back to dt */
        be->cast(be, (size_t)n * RESNET_CLASSES, DT_F32, dlogits, dt, r->dfc_out);
        dfc = r->dfc_out;
    }
    const struct layer_list *L = &m->layers;
    layer_enter(L, r->l_fc, LAYER_BACKWARD);
    if (linear_backward(be, &r->fc, n, r->pooled, dfc, r->g[0], hook))
        return -1;
    layer_leave(L, r->l_fc, LAYER_BACKWARD);
    layer_enter(L, r->l_pool, LAYER_BACKWARD);
    be->adaptive_avgpool2d_backward(be, n, feat, r->fh, r->fw, 1, 1, dt, r->g[0], r->g[1]);
    layer_leave(L, r->l_pool, LAYER_BACKWARD);
    int cur = 1; /* r->g[cur] holds the gradient of the current block's output */
    for (int i = RESNET_BLOCKS - 1; i >= 0; i--) {
        int other[3]; /* the free buffers: the block's dx, then its two scratch */
        for (int k = 0, j = 0; k < 4; k++)
            if (k != cur)
                other[j++] = k;
        if (resblock_backward(be, &r->blocks[i], r->g[cur], r->g[other[0]], r->g[other[1]],
                              r->g[other[2]], hook))
            return -1;
        cur = other[0];
    }
    void *g = r->g[cur];
    const int hw = r->cs1.p * r->cs1.q;
    layer_enter(L, r->l_relu1, LAYER_BACKWARD);
    be->relu_backward(be, (size_t)n * r->width * hw, dt, r->a0, g, g);
    layer_leave(L, r->l_relu1, LAYER_BACKWARD);
    layer_enter(L, r->l_bn1, LAYER_BACKWARD);
    if (batchnorm_backward(be, &r->bn1, n, hw, r->c0, g, g, hook))
        return -1;
    layer_leave(L, r->l_bn1, LAYER_BACKWARD);
    layer_enter(L, r->l_conv1, LAYER_BACKWARD);
    if (conv2d_backward(be, &r->conv1, &r->cs1, r->x, g, NULL, hook))
        return -1;
    layer_leave(L, r->l_conv1, LAYER_BACKWARD);
    /* autocast's weight gradients no hook cast already, to fp32 */
    return params_grads_to_f32(&m->params, 0, m->params.trainable - 1);
}

static void resnet_set_sync_bn(struct model *m, struct comm *comm)
{
    struct resnet18 *r = m->impl;
    r->bn1.sync = comm;
    for (int i = 0; i < RESNET_BLOCKS; i++)
        resblock_set_sync_bn(&r->blocks[i], comm);
}

static int resnet_set_amp(struct model *m, enum amp_dtype amp)
{
    struct resnet18 *r = m->impl;
    m->amp = amp;
    if (r->dt != (enum dtype)amp) /* the activations change type: reallocated by forward */
        resnet_free_buffers(m->be, r);
    r->dt = r->bn1.dt = (enum dtype)amp;
    conv2d_set_amp(&r->conv1, amp);
    linear_set_amp(&r->fc, amp);
    for (int i = 0; i < RESNET_BLOCKS; i++)
        resblock_set_amp(m->be, &r->blocks[i], amp);
    if (params_set_amp(&m->params, (enum dtype)amp))
        return error_wrap("resnet18 autocast");
    return 0;
}

static void resnet_destroy(struct model *m)
{
    if (!m)
        return;
    struct resnet18 *r = m->impl;
    if (r) {
        resnet_free_buffers(m->be, r);
        batchnorm_free(m->be, &r->bn1);
        for (int i = 0; i < RESNET_BLOCKS; i++)
            resblock_free(m->be, &r->blocks[i]);
        free(r);
    }
    params_free(&m->params);
    layer_list_free(&m->layers);
    free(m);
}

/* the layers in forward order with their module names (layer_list.h) */
static int resnet_list_layers(struct model *m, struct resnet18 *r)
{
    struct layer_list *L = &m->layers;
    const int w = r->width;
    int h = m->in_h, wd = m->in_w, p, q;
    if ((r->l_conv1 = layer_list_conv(L, "conv1.0", m->in_c, h, wd, w, 3, 1, 1, 0, 0, &p,
                                      &q)) < 0 ||
        (r->l_bn1 = layer_list_batchnorm(L, "conv1.1", w, p * q)) < 0 ||
        (r->l_relu1 = layer_list_relu(L, "conv1.2", (double)w * p * q)) < 0)
        return -1;
    h = p, wd = q;
    for (int i = 0; i < RESNET_BLOCKS; i++) {
        char prefix[32];
        snprintf(prefix, sizeof prefix, "conv%d.%d", i / 2 + 2, i % 2);
        if (resblock_list_layers(&r->blocks[i], L, prefix, h, wd, &p, &q))
            return -1;
        h = p, wd = q;
    }
    if ((r->l_pool = layer_list_avgpool(L, "avg_pool", 8 * w, h, wd)) < 0 ||
        (r->l_fc = layer_list_linear(L, "dense_layer", 8 * w, RESNET_CLASSES, 1)) < 0)
        return -1;
    return 0;
}

struct model *resnet18_create(struct backend *be, uint64_t seed, int width)
{
    if (width < 1 || width > 4096)
        return error_set("resnet18: width %d: use 1..4096 (the example's network is 64)",
                         width),
               NULL;
    struct model *m = calloc(1, sizeof *m);
    struct resnet18 *r = calloc(1, sizeof *r);
    if (!m || !r) {
        free(m);
        free(r);
        return error_set("resnet18: out of memory"), NULL;
    }
    *m = (struct model){.name = resnet18_spec.name, .be = be, .in_c = resnet18_spec.in_c,
                        .in_h = resnet18_spec.in_h, .in_w = resnet18_spec.in_w,
                        .classes = RESNET_CLASSES, .forward = resnet_forward,
                        .backward = resnet_backward, .set_sync_bn = resnet_set_sync_bn,
                        .set_amp = resnet_set_amp, .destroy = resnet_destroy, .impl = r};
    r->width = width;
    params_init(&m->params, be);
    struct rng rng;
    rng_seed(&rng, seed);
    int rc = conv2d_init(&r->conv1, &m->params, "conv1.0", 3, width, 3, 1, 1, 0, &rng) ||
             batchnorm_init(&r->bn1, &m->params, "conv1.1", width);
    /* conv2..conv5: (channels, stride of the first block) */
    static const int stage_mult[4] = {1, 2, 4, 8}, stage_stride[4] = {1, 2, 2, 2};
    int in = width;
    for (int s = 0; s < 4 && !rc; s++)
        for (int k = 0; k < 2 && !rc; k++) {
            char prefix[32];
            snprintf(prefix, sizeof prefix, "conv%d.%d", s + 2, k);
            const int out = width * stage_mult[s];
            rc = resblock_init(&r->blocks[2 * s + k], &m->params, prefix, in, out,
                               k == 0 ? stage_stride[s] : 1, &rng);
            in = out;
        }
    if (rc || linear_init(&r->fc, &m->params, "dense_layer", 8 * width, RESNET_CLASSES, &rng) ||
        resnet_list_layers(m, r) || params_pack(&m->params)) {
        resnet_destroy(m);
        return NULL;
    }
    return m;
}

static struct model *resnet18_create_opts(struct backend *be, uint64_t seed,
                                          const struct model_opts *opts)
{
    return resnet18_create(be, seed, opts->width);
}

const struct model_spec resnet18_spec = {
    .name = "resnet18", .about = "the distributed-training example's, CIFAR-10", .in_c = 3,
    .in_h = 32, .in_w = 32, .classes = RESNET_CLASSES, .example_lines = 1,
    .option = "--resnet-width", .create = resnet18_create_opts};
