/* comm.c — transport-independent helpers of struct comm (see comm.h). */
#include "comm/comm.h"

#include "common/error.h"

int comm_allreduce(struct comm *c, void *buf, size_t count, enum comm_dtype dt)
{
    if (c->allreduce)
        return c->allreduce(c, buf, count, dt);
    struct comm_work *w = c->allreduce_async(c, buf, count, dt);
    if (!w)
        return -1;
    return c->wait(c, w, NULL);
}

int comm_join(struct comm *c, struct comm_work *work)
{
    return c->join ? c->join(c, work) : c->wait(c, work, NULL);
}

int comm_allreduce_join(struct comm *c, void *buf, size_t count, enum comm_dtype dt)
{
    if (c->allreduce_join)
        return c->allreduce_join(c, buf, count, dt);
    if (!c->join)
        return comm_allreduce(c, buf, count, dt);
    struct comm_work *w = c->allreduce_async(c, buf, count, dt);
    if (!w)
        return -1;
    return c->join(c, w);
}

int comm_allgather_join(struct comm *c, const void *send, void *recv, size_t count,
                        enum comm_dtype dt)
{
    return c->allgather_join ? c->allgather_join(c, send, recv, count, dt)
                             : c->allgather(c, send, recv, count, dt);
}

int comm_settle(struct comm *c) { return c && c->settle ? c->settle(c) : 0; }

size_t comm_dtype_size(enum comm_dtype dt)
{
    switch (dt) {
    case COMM_F32:
        return 4;
    case COMM_F16:
    case COMM_BF16:
        return 2;
    }
    return 0; /* not a dtype: callers treat 0 as invalid */
}
