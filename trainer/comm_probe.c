/* comm_probe.c — the recording comm wrapper (see comm_probe.h). */
#include "comm_probe.h"

#include <stdlib.h>

#include "common/error.h"
#include "probes/probe.h"

struct comm_probe {
    struct comm base; /* first: a struct comm * is a struct comm_probe * */
    struct comm *inner;
    struct probe *probe;
};

static struct comm_probe *cp(struct comm *c) { return (struct comm_probe *)c; }

static uint64_t cp_bytes(size_t count, enum comm_dtype dt)
{
    return (uint64_t)count * comm_dtype_size(dt);
}

/* the collective's range ends: rc passed through */
static int cp_done(struct comm_probe *p, int rc, uint64_t bytes)
{
    probe_pop_bytes(p->probe, bytes);
    return rc;
}

static int cp_broadcast(struct comm *c, void *buf, size_t count, enum comm_dtype dt, int root)
{
    struct comm_probe *p = cp(c);
    probe_push_sized(p->probe, PROBE_COMM_BROADCAST, cp_bytes(count, dt));
    return cp_done(p, p->inner->broadcast(p->inner, buf, count, dt, root), cp_bytes(count, dt));
}

static int cp_reduce(struct comm *c, void *buf, size_t count, enum comm_dtype dt, int root)
{
    struct comm_probe *p = cp(c);
    probe_push_sized(p->probe, PROBE_COMM_REDUCE, cp_bytes(count, dt));
    return cp_done(p, p->inner->reduce(p->inner, buf, count, dt, root), cp_bytes(count, dt));
}

/* all-gather bytes: what this rank receives, world * count elements (as the flight
 * recorder's) */
static int cp_allgather(struct comm *c, const void *send, void *recv, size_t count,
                        enum comm_dtype dt)
{
    struct comm_probe *p = cp(c);
    probe_push_sized(p->probe, PROBE_COMM_ALLGATHER, cp_bytes(count * (size_t)c->world, dt));
    return cp_done(p, p->inner->allgather(p->inner, send, recv, count, dt),
                   cp_bytes(count * (size_t)c->world, dt));
}

static int cp_allgather_join(struct comm *c, const void *send, void *recv, size_t count,
                             enum comm_dtype dt)
{
    struct comm_probe *p = cp(c);
    probe_push_sized(p->probe, PROBE_COMM_ALLGATHER, cp_bytes(count * (size_t)c->world, dt));
    return cp_done(p, comm_allgather_join(p->inner, send, recv, count, dt),
                   cp_bytes(count * (size_t)c->world, dt));
}

static int cp_barrier(struct comm *c)
{
    struct comm_probe *p = cp(c);
    probe_push_sized(p->probe, PROBE_BARRIER, 0);
    return cp_done(p, p->inner->barrier(p->inner), 0);
}

static int cp_allreduce(struct comm *c, void *buf, size_t count, enum comm_dtype dt)
{
    struct comm_probe *p = cp(c);
    probe_push_sized(p->probe, PROBE_COMM_ALLREDUCE, cp_bytes(count, dt));
    return cp_done(p, comm_allreduce(p->inner, buf, count, dt), cp_bytes(count, dt));
}

static int cp_allreduce_join(struct comm *c, void *buf, size_t count, enum comm_dtype dt)
{
    struct comm_probe *p = cp(c);
    probe_push_sized(p->probe, PROBE_COMM_ALLREDUCE, cp_bytes(count, dt));
    return cp_done(p, comm_allreduce_join(p->inner, buf, count, dt), cp_bytes(count, dt));
}

/* not recorded: an asynchronous all-reduce issued on the wrapper has no range on the
 * training thread (the reducer's, the only ones, go to the bare comm) */
static struct comm_work *cp_allreduce_async(struct comm *c, void *buf, size_t count,
                                            enum comm_dtype dt)
{
    return cp(c)->inner->allreduce_async(cp(c)->inner, buf, count, dt);
}

static int cp_wait(struct comm *c, struct comm_work *work, struct comm_span *span)
{
    return cp(c)->inner->wait(cp(c)->inner, work, span);
}

static int cp_join(struct comm *c, struct comm_work *work)
{
    return cp(c)->inner->join(cp(c)->inner, work);
}

static int cp_settle(struct comm *c) { return cp(c)->inner->settle(cp(c)->inner); }

static void *cp_stream(struct comm *c) { return cp(c)->inner->stream(cp(c)->inner); }

static int cp_order(struct comm *c) { return cp(c)->inner->order(cp(c)->inner); }

static void cp_destroy(struct comm *c) { free(c); }

static void cp_progress(struct comm *c) { cp(c)->inner->progress(cp(c)->inner); }

struct comm *comm_probe_wrap(struct comm *inner, struct probe *probe)
{
    struct comm_probe *p = calloc(1, sizeof *p);
    if (!p) {
        error_set("out of memory for the recording comm");
        return NULL;
    }
    const struct comm *in = inner;
    p->inner = inner;
    p->probe = probe;
    p->base = (struct comm){
        .name = in->name,
        .rank = in->rank,
        .world = in->world,
        .broadcast = cp_broadcast,
        .allreduce_async = cp_allreduce_async,
        .wait = cp_wait,
        .reduce = cp_reduce,
        .allgather = cp_allgather,
        .barrier = cp_barrier,
        .stream = in->stream ? cp_stream : NULL,
        .order = in->order ? cp_order : NULL,
        .destroy = cp_destroy,
        .allreduce = cp_allreduce,
        .join = in->join ? cp_join : NULL,
        .allgather_join = cp_allgather_join,
        .settle = in->settle ? cp_settle : NULL,
        .allreduce_join = cp_allreduce_join,
        .progress = in->progress ? cp_progress : NULL,
    };
    return &p->base;
}
