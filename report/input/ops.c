/* ops.c — time per operator and per kernel name (see ops.h and report/FORMULAS.md
 * "ops.csv"). */
#include "report/input/ops.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/vec.h"

#define OPS_FIRST_SLOTS 256 /* a power of two */

/* ---- the op table ---- */

static size_t op_hash(int kind, uint32_t name, size_t nslot)
{
    uint64_t h = ((uint64_t)(unsigned)kind << 32 | name) * 0x9e3779b97f4a7c15ull;
    return (size_t)(h >> 32) & (nslot - 1);
}

static int op_rehash(struct op_table *t, size_t nslot)
{
    uint32_t *slot = calloc(nslot, sizeof *slot);
    if (!slot)
        return error_set("report: out of memory for %zu op names", t->n);
    for (size_t k = 0; k < t->n; k++) {
        size_t i = op_hash(t->v[k].kind, t->v[k].name, nslot);
        while (slot[i])
            i = (i + 1) & (nslot - 1);
        slot[i] = (uint32_t)(k + 1);
    }
    free(t->slot);
    t->slot = slot;
    t->nslot = nslot;
    return 0;
}

/* The index of (kind, name) in t->v, added when new; -1 after error_set(). */
static long op_stat_of(struct op_table *t, int kind, uint32_t name, int cls)
{
    if (2 * (t->n + 1) > t->nslot &&
        op_rehash(t, t->nslot ? 2 * t->nslot : OPS_FIRST_SLOTS) < 0)
        return -1;
    size_t i = op_hash(kind, name, t->nslot);
    while (t->slot[i]) {
        struct op_stat *s = &t->v[t->slot[i] - 1];
        if (s->kind == kind && s->name == name)
            return (long)(t->slot[i] - 1);
        i = (i + 1) & (t->nslot - 1);
    }
    if (t->n >= UINT32_MAX - 1 || VEC_RESERVE(t->v, t->cap, t->n + 1))
        return error_set("report: out of memory for %zu op names", t->n + 1);
    t->v[t->n] = (struct op_stat){.name = name, .kind = (uint8_t)kind, .cls = (uint8_t)cls,
                                  .min_ns = INT64_MAX, .max_ns = INT64_MIN};
    t->slot[i] = (uint32_t)(t->n + 1);
    return (long)t->n++;
}

static void op_count(struct op_stat *s, int64_t dur, int64_t self)
{
    s->calls++;
    s->total_ns += dur;
    s->self_ns += self;
    if (dur < s->min_ns)
        s->min_ns = dur;
    if (dur > s->max_ns)
        s->max_ns = dur;
}

static struct op_thread *op_thread_of(struct op_table *t, int64_t tid)
{
    if (t->last_thread < t->nthreads && t->threads[t->last_thread].tid == tid)
        return &t->threads[t->last_thread];
    for (size_t i = 0; i < t->nthreads; i++)
        if (t->threads[i].tid == tid) {
            t->last_thread = i;
            return &t->threads[i];
        }
    if (VEC_RESERVE(t->threads, t->cap_threads, t->nthreads + 1)) {
        error_set("report: out of memory for %zu threads' ops", t->nthreads + 1);
        return NULL;
    }
    t->threads[t->nthreads] = (struct op_thread){.tid = tid};
    t->last_thread = t->nthreads;
    return &t->threads[t->nthreads++];
}

void op_table_torch(struct op_table *t)
{
    t->merge_only_child = 1;
}

/* Count the pending only child of f (it has a sibling after all). */
static void op_flush(struct op_table *t, struct op_frame *f)
{
    if (f->pend)
        op_count(&t->v[f->stat], f->pend_dur, f->pend_dur - f->pend_child_ns);
    f->pend = 0;
}

/* Close the innermost open op of th: its self time is known now.  (merge_only_child: an
 * only child of its parent's name waits in the parent, which drops it if no sibling came.) */
static void op_close(struct op_table *t, struct op_thread *th)
{
    struct op_frame f = th->v[--th->n];
    int64_t dur = f.end - f.start;
    if (f.pend && f.nchild == 1) /* its only child is no op: the child's children are its */
        f.child_ns = f.pend_child_ns;
    else
        op_flush(t, &f);
    struct op_frame *parent = th->n > 0 ? &th->v[th->n - 1] : NULL;
    if (t->merge_only_child && parent && parent->stat == f.stat && parent->nchild == 1) {
        parent->pend = 1;
        parent->pend_dur = dur;
        parent->pend_child_ns = f.child_ns;
        return;
    }
    op_count(&t->v[f.stat], dur, dur - f.child_ns);
}

/* Keep [start, end) of stat, nested in the thread's innermost open op, in th's history. */
static int op_keep(struct op_table *t, struct op_thread *th, int64_t start, int64_t end,
                   size_t stat)
{
    if (th->hist_full)
        return 0;
    if (t->nhist >= OPS_HISTORY) {
        th->hist_full = 1;
        th->hist_stop = start;
        return 0;
    }
    if (VEC_RESERVE(th->hist, th->cap_hist, th->nhist + 1))
        return error_set("report: out of memory for %zu ops", t->nhist + 1);
    th->hist[th->nhist] = (struct op_hist){.start = start, .end = end, .stat = (uint32_t)stat,
                                           .parent = th->n > 0 ? th->v[th->n - 1].hist : 0};
    th->nhist++;
    t->nhist++;
    return 0;
}

/* An op that came too late for the stack: the innermost kept op of its thread that holds
 * it by key_averages' rule (the ancestors of the last op sorted before it, innermost
 * first: the first it starts before the end of and ends no later than) loses its time. */
static void op_late_in_history(struct op_table *t, struct op_thread *th, int64_t start,
                               int64_t end)
{
    if (th->nhist == 0 || (th->hist_full && start >= th->hist_stop)) {
        t->late_unnested++;
        return;
    }
    size_t lo = 0, hi = th->nhist; /* the first kept op sorted after [start, end) */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const struct op_hist *h = &th->hist[mid];
        if (h->start < start || (h->start == start && h->end >= end))
            lo = mid + 1;
        else
            hi = mid;
    }
    for (uint32_t p = (uint32_t)lo; p != 0; p = th->hist[p - 1].parent) {
        const struct op_hist *h = &th->hist[p - 1];
        if (start < h->end && end <= h->end) {
            t->v[h->stat].self_ns -= end - start;
            return;
        }
    }
}

/* A late op: the innermost late op still open on its thread that holds it (late ops come
 * in start order among themselves, as Kineto writes its runtime and driver calls), else
 * the kept op that does, loses its time; then it is open itself. */
static int op_late(struct op_table *t, struct op_thread *th, int64_t start, int64_t end,
                   size_t stat)
{
    t->late++;
    int nested = 0;
    while (th->nlate > 0 && !nested) {
        struct op_frame *top = &th->late[th->nlate - 1];
        if (start < top->start || start >= top->end || end > top->end) {
            th->nlate--;
            continue;
        }
        t->v[top->stat].self_ns -= end - start;
        nested = 1;
    }
    if (!nested)
        op_late_in_history(t, th, start, end);
    if (VEC_RESERVE(th->late, th->cap_late, th->nlate + 1))
        return error_set("report: out of memory for late ops nested %zu deep", th->nlate + 1);
    th->late[th->nlate++] = (struct op_frame){.start = start, .end = end, .stat = stat};
    return 0;
}

int op_table_cpu(struct op_table *t, int64_t tid, int64_t start, int64_t end, uint32_t name)
{
    if (end < start)
        end = start;
    struct op_thread *th = op_thread_of(t, tid);
    long stat = th ? op_stat_of(t, OP_CPU, name, 0) : -1;
    if (stat < 0)
        return -1;
    if (t->any && start < t->last_start) { /* too late for the stack */
        op_count(&t->v[stat], end - start, end - start);
        return op_late(t, th, start, end, (size_t)stat);
    }
    t->last_start = start;
    t->any = 1;
    /* key_averages' nesting: the innermost open op that holds this one is its parent (it
     * starts before the parent ends and ends no later); the others are done */
    while (th->n > 0) {
        struct op_frame *top = &th->v[th->n - 1];
        if (start >= top->end || end > top->end) {
            op_close(t, th);
            continue;
        }
        top->child_ns += end - start;
        if (++top->nchild > 1)
            op_flush(t, top);
        break;
    }
    if (op_keep(t, th, start, end, (size_t)stat) < 0)
        return -1;
    if (VEC_RESERVE(th->v, th->cap, th->n + 1))
        return error_set("report: out of memory for ops nested %zu deep", th->n + 1);
    th->v[th->n++] = (struct op_frame){.start = start, .end = end, .stat = (size_t)stat,
                                       .hist = th->hist_full ? 0 : (uint32_t)th->nhist};
    return 0;
}

int op_table_async(struct op_table *t, uint32_t name, int64_t start, int64_t end)
{
    long stat = op_stat_of(t, OP_CPU, name, 0);
    if (stat < 0)
        return -1;
    op_count(&t->v[stat], end > start ? end - start : 0, 0);
    return 0;
}

int op_table_kernel(struct op_table *t, uint32_t name, enum kernel_class cls, int64_t start,
                    int64_t end)
{
    long stat = op_stat_of(t, OP_KERNEL, name, (int)cls);
    if (stat < 0)
        return -1;
    int64_t dur = end > start ? end - start : 0;
    op_count(&t->v[stat], dur, 0);
    return 0;
}

int op_table_finish(struct op_table *t)
{
    for (size_t i = 0; i < t->nthreads; i++) {
        while (t->threads[i].n > 0)
            op_close(t, &t->threads[i]);
        free(t->threads[i].v);
        free(t->threads[i].late);
        free(t->threads[i].hist);
    }
    free(t->threads);
    t->threads = NULL;
    t->nthreads = t->cap_threads = 0;
    return 0;
}

int op_table_any(const struct op_table *t)
{
    return t && t->n > 0;
}

void op_table_free(struct op_table *t)
{
    if (!t)
        return;
    op_table_finish(t);
    free(t->v);
    free(t->slot);
    memset(t, 0, sizeof *t);
}
