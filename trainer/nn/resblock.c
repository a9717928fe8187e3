/* resblock.c — the example ResNet18's residual block (see resblock.h). */
#include "nn/resblock.h"

#include "common/error.h"

#include <stdio.h>

int resblock_init(struct resblock *b, struct param_table *t, const char *prefix, int in,
                  int out, int stride, struct rng *rng)
{
    *b = (struct resblock){.in = in, .out = out, .stride = stride,
                           .projection = stride != 1 || in != out, .l_conv1 = -1,
                           .l_bn1 = -1, .l_relu1 = -1, .l_conv2 = -1, .l_bn2 = -1,
                           .l_conv_sc = -1, .l_bn_sc = -1, .l_add = -1, .l_relu = -1};
    char name[PARAM_NAME_MAX];
#define SUB(leaf) (snprintf(name, sizeof name, "%s.%s", prefix, leaf), name)
    if (conv2d_init(&b->conv1, t, SUB("residual_function.0"), in, out, 3, stride, 1, 0, rng) ||
        batchnorm_init(&b->bn1, t, SUB("residual_function.1"), out) ||
        conv2d_init(&b->conv2, t, SUB("residual_function.3"), out, out, 3, 1, 1, 0, rng) ||
        batchnorm_init(&b->bn2, t, SUB("residual_function.4"), out))
        return error_wrap("residual block %s", prefix);
    if (b->projection &&
        (conv2d_init(&b->conv_sc, t, SUB("shortcut.0"), in, out, 1, stride, 0, 0, rng) ||
         batchnorm_init(&b->bn_sc, t, SUB("shortcut.1"), out)))
        return error_wrap("residual block %s", prefix);
#undef SUB
    return 0;
}

int resblock_list_layers(struct resblock *b, struct layer_list *L, const char *prefix, int h,
                         int w, int *p, int *q)
{
    char name[PARAM_NAME_MAX];
#define SUB(leaf) (snprintf(name, sizeof name, "%s.%s", prefix, leaf), name)
    int p2, q2;
    if ((b->l_conv1 = layer_list_conv(L, SUB("residual_function.0"), b->in, h, w, b->out, 3,
                                      b->stride, 1, 0, 1, p, q)) < 0)
        return -1;
    const int pq = *p * *q;
    const double m = (double)b->out * pq;
    if ((b->l_bn1 = layer_list_batchnorm(L, SUB("residual_function.1"), b->out, pq)) < 0 ||
        (b->l_relu1 = layer_list_relu(L, SUB("residual_function.2"), m)) < 0 ||
        (b->l_conv2 = layer_list_conv(L, SUB("residual_function.3"), b->out, *p, *q, b->out,
                                      3, 1, 1, 0, 1, &p2, &q2)) < 0 ||
        (b->l_bn2 = layer_list_batchnorm(L, SUB("residual_function.4"), b->out, pq)) < 0)
        return -1;
    if (b->projection &&
        ((b->l_conv_sc = layer_list_conv(L, SUB("shortcut.0"), b->in, h, w, b->out, 1,
                                         b->stride, 0, 0, 1, &p2, &q2)) < 0 ||
         (b->l_bn_sc = layer_list_batchnorm(L, SUB("shortcut.1"), b->out, pq)) < 0))
        return -1;
    /* the sum's backward: the two gradients of the block's input added */
    if ((b->l_add = layer_list_add(L, SUB("add"), m, (double)b->in * h * w)) < 0 ||
        (b->l_relu = layer_list_relu(L, SUB("relu"), m)) < 0)
        return -1;
#undef SUB
    b->layers = L;
    return 0;
}

static void resblock_free_buffers(struct backend *be, struct resblock *b)
{
    void **bufs[] = {&b->c1, &b->a1, &b->c2, &b->y, &b->c_sc, &b->b_sc};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) {
        be->free(be, *bufs[i]);
        *bufs[i] = NULL;
    }
    b->cap = 0;
}

static int resblock_reserve(struct backend *be, struct resblock *b, size_t elems)
{
    if (elems <= b->cap)
        return 0;
    resblock_free_buffers(be, b);
    void **bufs[] = {&b->c1, &b->a1, &b->c2, &b->y, &b->c_sc, &b->b_sc};
    const size_t count = b->projection ? 6 : 4;
    for (size_t i = 0; i < count; i++)
        if (!(*bufs[i] = backend_alloc_elems(be, elems, b->dt))) {
            resblock_free_buffers(be, b);
            return error_wrap("residual block %s: activations of %zu elements",
                              b->conv1.weight->name, elems);
        }
    b->cap = elems;
    return 0;
}

int resblock_forward(struct backend *be, struct resblock *b, const void *x, int n, int h, int w,
                     int train, const void **y)
{
    if (conv2d_shape_for(&b->conv1, n, h, w, &b->cs1) ||
        conv2d_shape_for(&b->conv2, n, b->cs1.p, b->cs1.q, &b->cs2) ||
        (b->projection && conv2d_shape_for(&b->conv_sc, n, h, w, &b->cs_sc)))
        return error_wrap("residual block %s", b->conv1.weight->name);
    b->n = n, b->h = h, b->w = w, b->p = b->cs1.p, b->q = b->cs1.q;
    const int pq = b->p * b->q;
    const size_t m = (size_t)n * b->out * pq;
    if (resblock_reserve(be, b, m))
        return -1;
    b->x = x;
    const struct layer_list *L = b->layers;
    layer_enter(L, b->l_conv1, LAYER_FORWARD);
    conv2d_forward(be, &b->conv1, &b->cs1, x, b->c1);
    layer_leave(L, b->l_conv1, LAYER_FORWARD);
    layer_enter(L, b->l_bn1, LAYER_FORWARD);
    if (batchnorm_forward(be, &b->bn1, n, pq, b->c1, b->a1, train))
        return -1;
    layer_leave(L, b->l_bn1, LAYER_FORWARD);
    layer_enter(L, b->l_relu1, LAYER_FORWARD);
    be->relu_forward(be, m, b->dt, b->a1, b->a1);
    layer_leave(L, b->l_relu1, LAYER_FORWARD);
    layer_enter(L, b->l_conv2, LAYER_FORWARD);
    conv2d_forward(be, &b->conv2, &b->cs2, b->a1, b->c2);
    layer_leave(L, b->l_conv2, LAYER_FORWARD);
    layer_enter(L, b->l_bn2, LAYER_FORWARD);
    if (batchnorm_forward(be, &b->bn2, n, pq, b->c2, b->y, train))
        return -1;
    layer_leave(L, b->l_bn2, LAYER_FORWARD);
    const void *shortcut = x; /* the identity: x is (n,out,p,q) already */
    if (b->projection) {
        layer_enter(L, b->l_conv_sc, LAYER_FORWARD);
        conv2d_forward(be, &b->conv_sc, &b->cs_sc, x, b->c_sc);
        layer_leave(L, b->l_conv_sc, LAYER_FORWARD);
        layer_enter(L, b->l_bn_sc, LAYER_FORWARD);
        if (batchnorm_forward(be, &b->bn_sc, n, pq, b->c_sc, b->b_sc, train))
            return -1;
        layer_leave(L, b->l_bn_sc, LAYER_FORWARD);
        shortcut = b->b_sc;
    }
    layer_enter(L, b->l_add, LAYER_FORWARD);
    be->add(be, m, b->dt, b->y, shortcut, b->y);
    layer_leave(L, b->l_add, LAYER_FORWARD);
    layer_enter(L, b->l_relu, LAYER_FORWARD);
    be->relu_forward(be, m, b->dt, b->y, b->y);
    layer_leave(L, b->l_relu, LAYER_FORWARD);
    *y = b->y;
    return 0;
}

int resblock_backward(struct backend *be, struct resblock *b, void *dy, void *dx, void *s0,
                      void *s1, const struct grad_hook *hook)
{
    const int n = b->n, pq = b->p * b->q;
    const size_t m = (size_t)n * b->out * pq;
    const struct layer_list *L = b->layers;
    void *g = dy; /* the gradient of the sum: shared by both branches */
    layer_enter(L, b->l_relu, LAYER_BACKWARD);
    be->relu_backward(be, m, b->dt, b->y, dy, g);
    layer_leave(L, b->l_relu, LAYER_BACKWARD);
    if (b->projection) {
        /* the shortcut first (reverse parameter order): its input gradient goes to dx */
        layer_enter(L, b->l_bn_sc, LAYER_BACKWARD);
        if (batchnorm_backward(be, &b->bn_sc, n, pq, b->c_sc, g, s0, hook))
            return -1;
        layer_leave(L, b->l_bn_sc, LAYER_BACKWARD);
        layer_enter(L, b->l_conv_sc, LAYER_BACKWARD);
        if (conv2d_backward(be, &b->conv_sc, &b->cs_sc, b->x, s0, dx, hook))
            return -1;
        layer_leave(L, b->l_conv_sc, LAYER_BACKWARD);
    }
    /* with the identity, g itself is the shortcut's input gradient, so the residual branch
     * must not overwrite it: it works in s0 and s1 */
    void *gb = b->projection ? g : s0;   /* bn2's input gradient */
    void *gc = b->projection ? s0 : s1;  /* conv2's input gradient, then bn1's */
    void *gx = b->projection ? s1 : s0;  /* conv1's input gradient */
    layer_enter(L, b->l_bn2, LAYER_BACKWARD);
    if (batchnorm_backward(be, &b->bn2, n, pq, b->c2, g, gb, hook))
        return -1;
    layer_leave(L, b->l_bn2, LAYER_BACKWARD);
    layer_enter(L, b->l_conv2, LAYER_BACKWARD);
    if (conv2d_backward(be, &b->conv2, &b->cs2, b->a1, gb, gc, hook))
        return -1;
    layer_leave(L, b->l_conv2, LAYER_BACKWARD);
    layer_enter(L, b->l_relu1, LAYER_BACKWARD);
    be->relu_backward(be, m, b->dt, b->a1, gc, gc);
    layer_leave(L, b->l_relu1, LAYER_BACKWARD);
    layer_enter(L, b->l_bn1, LAYER_BACKWARD);
    if (batchnorm_backward(be, &b->bn1, n, pq, b->c1, gc, gc, hook))
        return -1;
    layer_leave(L, b->l_bn1, LAYER_BACKWARD);
    layer_enter(L, b->l_conv1, LAYER_BACKWARD);
    if (conv2d_backward(be, &b->conv1, &b->cs1, b->x, gc, gx, hook))
        return -1;
    layer_leave(L, b->l_conv1, LAYER_BACKWARD);
    /* the sum's backward: the input's two gradients added */
    layer_enter(L, b->l_add, LAYER_BACKWARD);
    if (b->projection)
        be->add(be, (size_t)n * b->in * b->h * b->w, b->dt, dx, gx, dx);
    else
        be->add(be, m, b->dt, gx, g, dx);
    layer_leave(L, b->l_add, LAYER_BACKWARD);
    return 0;
}

void resblock_set_sync_bn(struct resblock *b, struct comm *comm)
{
    b->bn1.sync = b->bn2.sync = comm;
    if (b->projection)
        b->bn_sc.sync = comm;
}

void resblock_set_amp(struct backend *be, struct resblock *b, enum amp_dtype amp)
{
    if (b->dt != (enum dtype)amp) /* the activations change type: reallocated by forward */
        resblock_free_buffers(be, b);
    b->dt = b->bn1.dt = b->bn2.dt = b->bn_sc.dt = (enum dtype)amp;
    conv2d_set_amp(&b->conv1, amp);
    conv2d_set_amp(&b->conv2, amp);
    if (b->projection)
        conv2d_set_amp(&b->conv_sc, amp);
}

void resblock_free(struct backend *be, struct resblock *b)
{
    resblock_free_buffers(be, b);
    batchnorm_free(be, &b->bn1);
    batchnorm_free(be, &b->bn2);
    if (b->projection)
        batchnorm_free(be, &b->bn_sc);
}
