/* comm_staged.c — device-memory collectives staged through a host-memory comm (see
 * comm_staged.h).
 *
 * Host staging buffers are kept on a free list and reused (a bucket's all-reduce needs
 * one per step, of the same size); an in-flight all-reduce holds its buffer until its
 * wait.  Handles not waited for are on a live list, freed by destroy. */
#include "comm/comm_staged.h"

#include "common/error.h"

#include <stdlib.h>
#include <string.h>

struct stage_buf {
    void *p;
    size_t cap;
    struct stage_buf *next; /* free list */
};

struct comm_work {
    struct comm_work *inner;   /* the host collective's handle */
    struct stage_buf *buf;     /* host copy of dev */
    void *dev;
    size_t bytes;
    struct comm_work *prev, *next; /* live list */
};

struct staged_comm {
    struct comm base; /* first: a struct comm * is a struct staged_comm * */
    struct comm *inner;
    struct comm_stage stage;
    struct stage_buf *free_bufs;
    struct comm_work *live;
};

/* A host buffer of at least bytes (the smallest free one that fits), or NULL + error_set. */
static struct stage_buf *staged_buf_get(struct staged_comm *sc, size_t bytes)
{
    struct stage_buf **best = NULL;
    for (struct stage_buf **b = &sc->free_bufs; *b; b = &(*b)->next)
        if ((*b)->cap >= bytes && (!best || (*b)->cap < (*best)->cap))
            best = b;
    if (best) {
        struct stage_buf *b = *best;
        *best = b->next;
        return b;
    }
    struct stage_buf *b = calloc(1, sizeof *b);
    if (b) {
        b->cap = bytes ? bytes : 1;
        b->p = malloc(b->cap);
    }
    if (!b || !b->p) {
        free(b);
        error_set("rank %d: shm-staged: out of memory for a %zu-byte host copy",
                  sc->base.rank, bytes);
        return NULL;
    }
    return b;
}

static void staged_buf_put(struct staged_comm *sc, struct stage_buf *b)
{
    if (!b)
        return;
    b->next = sc->free_bufs;
    sc->free_bufs = b;
}

static int staged_down(struct staged_comm *sc, void *host, const void *dev, size_t bytes,
                       const char *what)
{
    if (bytes && sc->stage.download(sc->stage.ctx, host, dev, bytes))
        return error_wrap("rank %d: shm-staged %s: copying %zu bytes to the host",
                          sc->base.rank, what, bytes);
    return 0;
}

static int staged_up(struct staged_comm *sc, void *dev, const void *host, size_t bytes,
                     const char *what)
{
    if (bytes && sc->stage.upload(sc->stage.ctx, dev, host, bytes))
        return error_wrap("rank %d: shm-staged %s: copying %zu bytes back to the device",
                          sc->base.rank, what, bytes);
    return 0;
}

static int staged_broadcast(struct comm *c, void *buf, size_t count, enum comm_dtype dt,
                            int root)
{
    struct staged_comm *sc = (struct staged_comm *)c;
    const size_t bytes = count * comm_dtype_size(dt);
    struct stage_buf *b = staged_buf_get(sc, bytes);
    if (!b)
        return -1;
    int rc = 0;
    if (c->rank == root)
        rc = staged_down(sc, b->p, buf, bytes, "broadcast");
    if (rc == 0)
        rc = sc->inner->broadcast(sc->inner, b->p, count, dt, root);
    if (rc == 0 && c->rank != root)
        rc = staged_up(sc, buf, b->p, bytes, "broadcast");
    staged_buf_put(sc, b);
    return rc;
}

static struct comm_work *staged_allreduce_async(struct comm *c, void *buf, size_t count,
                                                enum comm_dtype dt)
{
    struct staged_comm *sc = (struct staged_comm *)c;
    struct comm_work *w = calloc(1, sizeof *w);
    if (!w) {
        error_set("rank %d: shm-staged all-reduce: out of memory", c->rank);
        return NULL;
    }
    w->dev = buf;
    w->bytes = count * comm_dtype_size(dt);
    if (!(w->buf = staged_buf_get(sc, w->bytes)) ||
        staged_down(sc, w->buf->p, buf, w->bytes, "all-reduce") ||
        !(w->inner = sc->inner->allreduce_async(sc->inner, w->buf->p, count, dt))) {
        staged_buf_put(sc, w->buf);
        free(w);
        return NULL;
    }
    w->next = sc->live;
    if (sc->live)
        sc->live->prev = w;
    sc->live = w;
    return w;
}

static void staged_unlink(struct staged_comm *sc, struct comm_work *w)
{
    if (w->prev)
        w->prev->next = w->next;
    else
        sc->live = w->next;
    if (w->next)
        w->next->prev = w->prev;
}

static int staged_wait(struct comm *c, struct comm_work *w, struct comm_span *span)
{
    struct staged_comm *sc = (struct staged_comm *)c;
    if (!w)
        return error_set("rank %d: shm-staged wait: no collective (NULL handle)", c->rank);
    int rc = sc->inner->wait(sc->inner, w->inner, span);
    if (rc == 0)
        rc = staged_up(sc, w->dev, w->buf->p, w->bytes, "all-reduce");
    staged_unlink(sc, w);
    staged_buf_put(sc, w->buf);
    free(w);
    return rc;
}

static int staged_reduce(struct comm *c, void *buf, size_t count, enum comm_dtype dt, int root)
{
    struct staged_comm *sc = (struct staged_comm *)c;
    const size_t bytes = count * comm_dtype_size(dt);
    struct stage_buf *b = staged_buf_get(sc, bytes);
    if (!b)
        return -1;
    int rc = staged_down(sc, b->p, buf, bytes, "reduce");
    if (rc == 0)
        rc = sc->inner->reduce(sc->inner, b->p, count, dt, root);
    if (rc == 0 && c->rank == root) /* the others' buffers are unchanged */
        rc = staged_up(sc, buf, b->p, bytes, "reduce");
    staged_buf_put(sc, b);
    return rc;
}

static int staged_allgather(struct comm *c, const void *send, void *recv, size_t count,
                            enum comm_dtype dt)
{
    struct staged_comm *sc = (struct staged_comm *)c;
    const size_t bytes = count * comm_dtype_size(dt), all = bytes * (size_t)c->world;
    struct stage_buf *s = staged_buf_get(sc, bytes), *r = s ? staged_buf_get(sc, all) : NULL;
    int rc = -1;
    if (r && staged_down(sc, s->p, send, bytes, "all-gather") == 0 &&
        sc->inner->allgather(sc->inner, s->p, r->p, count, dt) == 0)
        rc = staged_up(sc, recv, r->p, all, "all-gather");
    staged_buf_put(sc, s);
    staged_buf_put(sc, r);
    return rc;
}

static int staged_barrier(struct comm *c)
{
    struct staged_comm *sc = (struct staged_comm *)c;
    return sc->inner->barrier(sc->inner);
}

static void *staged_stream(struct comm *c)
{
    (void)c;
    return NULL;
}

static void staged_destroy(struct comm *c)
{
    struct staged_comm *sc = (struct staged_comm *)c;
    if (!sc)
        return;
    if (sc->inner)
        sc->inner->destroy(sc->inner); /* frees its handles not waited for */
    while (sc->live) {
        struct comm_work *w = sc->live;
        sc->live = w->next;
        staged_buf_put(sc, w->buf);
        free(w);
    }
    while (sc->free_bufs) {
        struct stage_buf *b = sc->free_bufs;
        sc->free_bufs = b->next;
        free(b->p);
        free(b);
    }
    free(sc);
}

/* the inner comm's (comm.h); set only where the inner comm has one: its threads are the
 * ones that need the core */
static void staged_progress(struct comm *c)
{
    struct comm *in = ((struct staged_comm *)c)->inner;
    in->progress(in);
}

static const struct comm staged_comm_ops = {
    .name = COMM_STAGED_NAME,
    .broadcast = staged_broadcast,
    .allreduce_async = staged_allreduce_async,
    .wait = staged_wait,
    .reduce = staged_reduce,
    .allgather = staged_allgather,
    .barrier = staged_barrier,
    .stream = staged_stream,
    .order = NULL, /* no stream: the download waits for the device itself */
    .destroy = staged_destroy,
};

struct comm *comm_staged_create(struct comm *inner, const struct comm_stage *stage)
{
    if (!inner || !stage || !stage->download || !stage->upload) {
        error_set("comm_staged_create: need a comm and a stage with download and upload");
        if (inner)
            inner->destroy(inner);
        return NULL;
    }
    struct staged_comm *sc = calloc(1, sizeof *sc);
    if (!sc) {
        error_set("rank %d: shm-staged: out of memory", inner->rank);
        inner->destroy(inner);
        return NULL;
    }
    sc->base = staged_comm_ops;
    sc->base.rank = inner->rank;
    sc->base.world = inner->world;
    sc->base.progress = inner->progress ? staged_progress : NULL;
    sc->inner = inner;
    sc->stage = *stage;
    return &sc->base;
}
