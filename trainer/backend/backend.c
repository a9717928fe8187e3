/* backend.c — backend-independent helpers declared in backend.h: the output shapes of
 * convolution and max pooling, checked once here so every backend can trust them, and
 * allocation by element type. */
#include "backend/backend.h"

#include "common/error.h"

#include <stdint.h>

void *backend_alloc_elems(struct backend *be, size_t numel, enum dtype dt)
{
    const size_t size = be->dtype_size(be, dt);
    if (numel > SIZE_MAX / size)
        return error_set("backend %s: %zu elements of %zu bytes overflow size_t", be->name,
                         numel, size),
               NULL;
    return be->alloc(be, numel * size);
}

int conv2d_shape_init(struct conv2d_shape *cs)
{
    if (cs->n < 1 || cs->c < 1 || cs->h < 1 || cs->w < 1 || cs->k < 1 || cs->r < 1 ||
        cs->s < 1)
        return error_set("conv2d_shape_init: non-positive size (n %d, c %d, h %d, w %d, "
                         "k %d, r %d, s %d): every size must be >= 1",
                         cs->n, cs->c, cs->h, cs->w, cs->k, cs->r, cs->s);
    if (cs->pad < 0 || cs->stride < 1)
        return error_set("conv2d_shape_init: pad %d, stride %d: need pad >= 0 and stride >= 1",
                         cs->pad, cs->stride);
    int hp = cs->h + 2 * cs->pad, wp = cs->w + 2 * cs->pad;
    if (hp < cs->r || wp < cs->s)
        return error_set("conv2d_shape_init: %dx%d kernel larger than the padded %dx%d input "
                         "(%dx%d, pad %d): use a smaller kernel or more padding",
                         cs->r, cs->s, hp, wp, cs->h, cs->w, cs->pad);
    cs->p = (hp - cs->r) / cs->stride + 1;
    cs->q = (wp - cs->s) / cs->stride + 1;
    return 0;
}

int pool2d_shape_init(struct pool2d_shape *ps)
{
    if (ps->n < 1 || ps->c < 1 || ps->h < 1 || ps->w < 1)
        return error_set("pool2d_shape_init: non-positive size (n %d, c %d, h %d, w %d): "
                         "every size must be >= 1",
                         ps->n, ps->c, ps->h, ps->w);
    if (ps->kernel < 1 || ps->stride < 1)
        return error_set("pool2d_shape_init: kernel %d, stride %d: both must be >= 1",
                         ps->kernel, ps->stride);
    if (ps->h < ps->kernel || ps->w < ps->kernel)
        return error_set("pool2d_shape_init: %dx%d window larger than the %dx%d input: "
                         "use a smaller kernel",
                         ps->kernel, ps->kernel, ps->h, ps->w);
    ps->p = (ps->h - ps->kernel) / ps->stride + 1;
    ps->q = (ps->w - ps->kernel) / ps->stride + 1;
    return 0;
}
