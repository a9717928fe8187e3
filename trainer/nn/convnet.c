/* convnet.c — the PyTorch DDP tutorial's ConvNet:
 *   layer1 = Conv2d(1,16,5,pad 2) BatchNorm2d(16) ReLU MaxPool2d(2)
 *   layer2 = Conv2d(16,32,5,pad 2) BatchNorm2d(32) ReLU MaxPool2d(2)
 *   fc     = Linear(7*7*32, 10)
 * with PyTorch's parameter names (layer1.0.weight, layer1.1.running_var, fc.bias, ...).
 *
 * Each layer runs its ReLU after the max pooling, on a quarter of the values: the max of
 * ReLUs is the ReLU of the max (ReLU never decreases), so the outputs are the same values,
 * and so are the gradients (a window's gradient reaches its maximum when that is > 0, else
 * nothing, either way).  Only a window of non-positive values may keep another argmax,
 * whose gradient is zero; and a NaN input, which PyTorch's order turns into 0 before the
 * pooling, here becomes 0 after it. */
#include "nn/batchnorm.h"
#include "nn/conv.h"
#include "nn/linear.h"
#include "nn/model.h"

#include "common/error.h"
#include "common/rng.h"

#include <stdlib.h>

struct convnet {
    struct conv2d conv1, conv2;
    struct batchnorm bn1, bn2;
    struct linear fc;
    enum dtype dt;            /* the activations' type: DT_F32, or autocast's half type */
    int cap;                  /* batch capacity of the buffers below */
    int n;                    /* batch of the last forward */
    struct conv2d_shape cs1, cs2;
    struct pool2d_shape ps1, ps2;
    const void *x;            /* conv1's input in the last forward (x itself, or x_cast) */
    /* activations, of dt: */
    void *c1, *a1, *p1;       /* conv1 out (n,16,28,28), bn (same), pool+relu (n,16,14,14) */
    void *c2, *a2, *p2;       /* conv2 out (n,32,14,14), bn (same), pool+relu (n,32,7,7) */
    void *g_big, *g_big2;     /* backward scratch, (n,16,28,28) each */
    void *x_cast;             /* autocast: the input cast to dt (n,1,28,28) */
    void *fc_out, *dfc_out;   /* autocast: fc's output (n,10) and its gradient */
    void *flat;               /* p2 converted to NCHW for fc (n,1568), where the backend's
                                 layout of dt is not NCHW; else NULL (fc reads p2) */
    int32_t *arg1, *arg2;     /* pooling argmax */
    float *logits;            /* (n,10) fp32: fc's output, or autocast's cast of it */
    /* indices in the model's layer list (forward order: each ReLU runs after its pool) */
    int l_conv1, l_bn1, l_pool1, l_relu1, l_conv2, l_bn2, l_pool2, l_relu2, l_fc;
};

static void convnet_free_buffers(struct backend *be, struct convnet *c)
{
    void *bufs[] = {c->c1, c->a1, c->p1, c->c2, c->a2, c->p2, c->g_big, c->g_big2,
                    c->x_cast, c->fc_out, c->dfc_out, c->flat, c->arg1, c->arg2,
                    c->logits};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        be->free(be, bufs[i]);
    c->c1 = c->a1 = c->p1 = c->c2 = c->a2 = c->p2 = c->g_big = c->g_big2 = NULL;
    c->x_cast = c->fc_out = c->dfc_out = c->flat = NULL;
    c->arg1 = c->arg2 = NULL;
    c->logits = NULL;
    c->cap = 0;
}

static int convnet_reserve(struct model *m, struct convnet *c, int n)
{
    if (n <= c->cap)
        return 0;
    struct backend *be = m->be;
    convnet_free_buffers(be, c);
    const enum dtype dt = c->dt;
    size_t big = (size_t)n * 16 * 28 * 28, mid = (size_t)n * 32 * 14 * 14;
    size_t p1 = (size_t)n * 16 * 14 * 14, p2 = (size_t)n * 32 * 7 * 7;
    c->c1 = backend_alloc_elems(be, big, dt);
    c->a1 = backend_alloc_elems(be, big, dt);
    c->p1 = backend_alloc_elems(be, p1, dt);
    c->c2 = backend_alloc_elems(be, mid, dt);
    c->a2 = backend_alloc_elems(be, mid, dt);
    c->p2 = backend_alloc_elems(be, p2, dt);
    c->g_big = backend_alloc_elems(be, big, dt);
    c->g_big2 = backend_alloc_elems(be, big, dt);
    c->arg1 = be->alloc(be, p1 * sizeof(int32_t));
    c->arg2 = be->alloc(be, p2 * sizeof(int32_t));
    c->logits = be->alloc(be, (size_t)n * 10 * sizeof(float));
    int ok = c->c1 && c->a1 && c->p1 && c->c2 && c->a2 && c->p2 && c->g_big && c->g_big2 &&
             c->arg1 && c->arg2 && c->logits;
    if (ok && dt != DT_F32) {
        c->x_cast = backend_alloc_elems(be, (size_t)n * 28 * 28, dt);
        c->fc_out = backend_alloc_elems(be, (size_t)n * 10, dt);
        c->dfc_out = backend_alloc_elems(be, (size_t)n * 10, dt);
        ok = c->x_cast && c->fc_out && c->dfc_out;
    }
    if (ok && be->layout(be, dt) != LAYOUT_NCHW)
        ok = (c->flat = backend_alloc_elems(be, p2, dt)) != NULL;
    if (!ok) {
        convnet_free_buffers(be, c);
        return error_wrap("convnet: activations for batch %d", n);
    }
    c->cap = n;
    return 0;
}

static int convnet_forward(struct model *m, const float *x, int n, int train,
                           const float **logits)
{
    struct convnet *c = m->impl;
    struct backend *be = m->be;
    if (convnet_reserve(m, c, n) || conv2d_shape_for(&c->conv1, n, 28, 28, &c->cs1) ||
        conv2d_shape_for(&c->conv2, n, 14, 14, &c->cs2))
        return -1;
    c->ps1 = (struct pool2d_shape){.n = n, .c = 16, .h = 28, .w = 28, .kernel = 2, .stride = 2};
    c->ps2 = (struct pool2d_shape){.n = n, .c = 32, .h = 14, .w = 14, .kernel = 2, .stride = 2};
    if (pool2d_shape_init(&c->ps1) || pool2d_shape_init(&c->ps2))
        return -1;
    c->n = n;
    const enum dtype dt = c->dt;
    c->x = x;
    if (dt != DT_F32) { /* autocast casts the input of the first conv (into the layout of
                           the backend's half tensors: the same with one channel), and the
                           weights */
        const int dims[4] = {n, 1, 28, 28};
        be->convert(be, dims, DT_F32, LAYOUT_NCHW, x, dt, be->layout(be, dt), c->x_cast);
        c->x = c->x_cast;
        params_cast_half(&m->params);
    }

    const struct layer_list *L = &m->layers;
    layer_enter(L, c->l_conv1, LAYER_FORWARD);
    conv2d_forward(be, &c->conv1, &c->cs1, c->x, c->c1);
    layer_leave(L, c->l_conv1, LAYER_FORWARD);
    layer_enter(L, c->l_bn1, LAYER_FORWARD);
    if (batchnorm_forward(be, &c->bn1, n, 28 * 28, c->c1, c->a1, train))
        return -1;
    layer_leave(L, c->l_bn1, LAYER_FORWARD);
    layer_enter(L, c->l_pool1, LAYER_FORWARD);
    be->maxpool2d_forward(be, &c->ps1, dt, c->a1, c->p1, c->arg1);
    layer_leave(L, c->l_pool1, LAYER_FORWARD);
    layer_enter(L, c->l_relu1, LAYER_FORWARD);
    be->relu_forward(be, (size_t)n * 16 * 14 * 14, dt, c->p1, c->p1);
    layer_leave(L, c->l_relu1, LAYER_FORWARD);

    layer_enter(L, c->l_conv2, LAYER_FORWARD);
    conv2d_forward(be, &c->conv2, &c->cs2, c->p1, c->c2);
    layer_leave(L, c->l_conv2, LAYER_FORWARD);
    layer_enter(L, c->l_bn2, LAYER_FORWARD);
    if (batchnorm_forward(be, &c->bn2, n, 14 * 14, c->c2, c->a2, train))
        return -1;
    layer_leave(L, c->l_bn2, LAYER_FORWARD);
    layer_enter(L, c->l_pool2, LAYER_FORWARD);
    be->maxpool2d_forward(be, &c->ps2, dt, c->a2, c->p2, c->arg2);
    layer_leave(L, c->l_pool2, LAYER_FORWARD);
    layer_enter(L, c->l_relu2, LAYER_FORWARD);
    be->relu_forward(be, (size_t)n * 32 * 7 * 7, dt, c->p2, c->p2);
    layer_leave(L, c->l_relu2, LAYER_FORWARD);

    /* the flatten: fc's weight is PyTorch's, over NCHW features */
    const void *feat = c->p2;
    if (c->flat) {
        const int dims[4] = {n, 32, 7, 7};
        be->convert(be, dims, dt, be->layout(be, dt), c->p2, dt, LAYOUT_NCHW, c->flat);
        feat = c->flat;
    }
    layer_enter(L, c->l_fc, LAYER_FORWARD);
    if (dt == DT_F32) {
        linear_forward(be, &c->fc, n, feat, c->logits);
        layer_leave(L, c->l_fc, LAYER_FORWARD);
    } else { /* the loss is autocast's fp32 op: it casts the logits to fp32 */
        linear_forward(be, &c->fc, n, feat, c->fc_out);
        layer_leave(L, c->l_fc, LAYER_FORWARD);
        be->cast(be, (size_t)n * 10, dt, c->fc_out, DT_F32, c->logits);
    }
    *logits = c->logits;
    return 0;
}

static int convnet_backward(struct model *m, const float *dlogits, const struct grad_hook *hook)
{
    struct convnet *c = m->impl;
    struct backend *be = m->be;
    int n = c->n;
    const enum dtype dt = c->dt;
    const size_t p2 = (size_t)n * 32 * 7 * 7, p1 = (size_t)n * 16 * 14 * 14;
    void *g_p2 = c->g_big2; /* (n,1568) */
    void *g_a2 = c->g_big;  /* (n,32,14,14), then dx of bn2 in place */
    void *g_p1 = c->g_big2; /* (n,16,14,14), free again once g_p2 is consumed */
    void *g_a1 = c->g_big;  /* (n,16,28,28), free again once g_a2 is consumed */

    const void *dfc = dlogits;
    if (dt != DT_F32) { /* the backward of the logits' cast to fp32: back to dt */
        be->cast(be, (size_t)n * 10, DT_F32, dlogits, dt, c->dfc_out);
        dfc = c->dfc_out;
    }
    const struct layer_list *L = &m->layers;
    layer_enter(L, c->l_fc, LAYER_BACKWARD);
    if (linear_backward(be, &c->fc, n, c->flat ? c->flat : c->p2, dfc,
                        c->flat ? g_a2 : g_p2, hook))
        return -1;
    layer_leave(L, c->l_fc, LAYER_BACKWARD);
    if (c->flat) { /* the flatten's backward: the NCHW gradient (in g_a2, free until the
                      pooling's backward) back into the backend's layout */
        const int dims[4] = {n, 32, 7, 7};
        be->convert(be, dims, dt, LAYOUT_NCHW, g_a2, dt, be->layout(be, dt), g_p2);
    }
    layer_enter(L, c->l_relu2, LAYER_BACKWARD);
    be->relu_backward(be, p2, dt, c->p2, g_p2, g_p2);
    layer_leave(L, c->l_relu2, LAYER_BACKWARD);
    layer_enter(L, c->l_pool2, LAYER_BACKWARD);
    be->maxpool2d_backward(be, &c->ps2, dt, g_p2, c->arg2, g_a2);
    layer_leave(L, c->l_pool2, LAYER_BACKWARD);
    layer_enter(L, c->l_bn2, LAYER_BACKWARD);
    if (batchnorm_backward(be, &c->bn2, n, 14 * 14, c->c2, g_a2, g_a2, hook))
        return -1;
    layer_leave(L, c->l_bn2, LAYER_BACKWARD);
    layer_enter(L, c->l_conv2, LAYER_BACKWARD);
    if (conv2d_backward(be, &c->conv2, &c->cs2, c->p1, g_a2, g_p1, hook))
        return -1;
    layer_leave(L, c->l_conv2, LAYER_BACKWARD);
    layer_enter(L, c->l_relu1, LAYER_BACKWARD);
    be->relu_backward(be, p1, dt, c->p1, g_p1, g_p1);
    layer_leave(L, c->l_relu1, LAYER_BACKWARD);
    layer_enter(L, c->l_pool1, LAYER_BACKWARD);
    be->maxpool2d_backward(be, &c->ps1, dt, g_p1, c->arg1, g_a1);
    layer_leave(L, c->l_pool1, LAYER_BACKWARD);
    layer_enter(L, c->l_bn1, LAYER_BACKWARD);
    if (batchnorm_backward(be, &c->bn1, n, 28 * 28, c->c1, g_a1, g_a1, hook))
        return -1;
    layer_leave(L, c->l_bn1, LAYER_BACKWARD);
    layer_enter(L, c->l_conv1, LAYER_BACKWARD);
    if (conv2d_backward(be, &c->conv1, &c->cs1, c->x, g_a1, NULL, hook))
        return -1;
    layer_leave(L, c->l_conv1, LAYER_BACKWARD);
    /* autocast's weight gradients no hook cast already, to fp32 */
    return params_grads_to_f32(&m->params, 0, m->params.trainable - 1);
}

static void convnet_set_sync_bn(struct model *m, struct comm *comm)
{
    struct convnet *c = m->impl;
    c->bn1.sync = comm;
    c->bn2.sync = comm;
}

static int convnet_set_amp(struct model *m, enum amp_dtype amp)
{
    struct convnet *c = m->impl;
    m->amp = amp;
    if (c->dt != (enum dtype)amp) /* the activations change type: reallocated by forward */
        convnet_free_buffers(m->be, c);
    c->dt = c->bn1.dt = c->bn2.dt = (enum dtype)amp;
    conv2d_set_amp(&c->conv1, amp);
    conv2d_set_amp(&c->conv2, amp);
    linear_set_amp(&c->fc, amp);
    if (params_set_amp(&m->params, (enum dtype)amp))
        return error_wrap("convnet autocast");
    return 0;
}

static void convnet_destroy(struct model *m)
{
    if (!m)
        return;
    struct convnet *c = m->impl;
    if (c) {
        convnet_free_buffers(m->be, c);
        batchnorm_free(m->be, &c->bn1);
        batchnorm_free(m->be, &c->bn2);
        free(c);
    }
    params_free(&m->params);
    layer_list_free(&m->layers);
    free(m);
}

/* the layers in the order forward runs them, with their PyTorch module names (layer1.2 is
 * the ReLU, layer1.3 the pool: here the pool runs first, see the top of the file) */
static int convnet_list_layers(struct layer_list *L, struct convnet *c)
{
    int p, q;
    c->l_conv1 = layer_list_conv(L, "layer1.0", 1, 28, 28, 16, 5, 1, 2, 1, 0, &p, &q);
    c->l_bn1 = layer_list_batchnorm(L, "layer1.1", 16, 28 * 28);
    c->l_pool1 = layer_list_maxpool(L, "layer1.3", 16, 28, 28, 2);
    c->l_relu1 = layer_list_relu(L, "layer1.2", 16 * 14 * 14);
    c->l_conv2 = layer_list_conv(L, "layer2.0", 16, 14, 14, 32, 5, 1, 2, 1, 1, &p, &q);
    c->l_bn2 = layer_list_batchnorm(L, "layer2.1", 32, 14 * 14);
    c->l_pool2 = layer_list_maxpool(L, "layer2.3", 32, 14, 14, 2);
    c->l_relu2 = layer_list_relu(L, "layer2.2", 32 * 7 * 7);
    c->l_fc = layer_list_linear(L, "fc", 7 * 7 * 32, 10, 1);
    return c->l_conv1 < 0 || c->l_bn1 < 0 || c->l_pool1 < 0 || c->l_relu1 < 0 ||
                   c->l_conv2 < 0 || c->l_bn2 < 0 || c->l_pool2 < 0 || c->l_relu2 < 0 ||
                   c->l_fc < 0
               ? -1
               : 0;
}

static struct model *convnet_create_opts(struct backend *be, uint64_t seed,
                                         const struct model_opts *opts)
{
    (void)opts;
    return convnet_create(be, seed);
}

const struct model_spec convnet_spec = {
    .name = "convnet", .about = "the DDP tutorial's", .in_c = 1, .in_h = 28, .in_w = 28,
    .classes = 10, .create = convnet_create_opts};

struct model *convnet_create(struct backend *be, uint64_t seed)
{
    struct model *m = calloc(1, sizeof *m);
    struct convnet *c = calloc(1, sizeof *c);
    if (!m || !c) {
        free(m);
        free(c);
        return error_set("convnet: out of memory"), NULL;
    }
    *m = (struct model){.name = convnet_spec.name, .be = be, .in_c = convnet_spec.in_c,
                        .in_h = convnet_spec.in_h, .in_w = convnet_spec.in_w,
                        .classes = convnet_spec.classes, .forward = convnet_forward,
                        .backward = convnet_backward, .set_sync_bn = convnet_set_sync_bn,
                        .set_amp = convnet_set_amp,
                        .destroy = convnet_destroy, .impl = c};
    params_init(&m->params, be);
    struct rng rng;
    rng_seed(&rng, seed);
    if (conv2d_init(&c->conv1, &m->params, "layer1.0", 1, 16, 5, 1, 2, 1, &rng) ||
        batchnorm_init(&c->bn1, &m->params, "layer1.1", 16) ||
        conv2d_init(&c->conv2, &m->params, "layer2.0", 16, 32, 5, 1, 2, 1, &rng) ||
        batchnorm_init(&c->bn2, &m->params, "layer2.1", 32) ||
        linear_init(&c->fc, &m->params, "fc", 7 * 7 * 32, 10, &rng) ||
        convnet_list_layers(&m->layers, c) || params_pack(&m->params)) {
        convnet_destroy(m);
        return NULL;
    }
    return m;
}
