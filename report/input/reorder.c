/* reorder.c — the bounded reorder window (see reorder.h): a binary min-heap of fixed-size
 * records ordered by (start ascending, end descending). */
#include "report/input/reorder.h"

#include <stdlib.h>
#include <string.h>

#include "common/error.h"

static int64_t rec_start(const unsigned char *p)
{
    int64_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

static int64_t rec_end(const unsigned char *p)
{
    int64_t v;
    memcpy(&v, p + sizeof v, sizeof v);
    return v;
}

/* a comes out before b (r->by_seq: equal ranges in the order of their third int64) */
static int rec_before(const struct reorder *r, const unsigned char *a, const unsigned char *b)
{
    int64_t sa = rec_start(a), sb = rec_start(b), ea = rec_end(a), eb = rec_end(b);
    if (sa != sb || ea != eb || !r->by_seq)
        return sa != sb ? sa < sb : ea > eb;
    int64_t qa, qb;
    memcpy(&qa, a + 2 * sizeof qa, sizeof qa);
    memcpy(&qb, b + 2 * sizeof qb, sizeof qb);
    return qa < qb;
}

int reorder_init_seq(struct reorder *r, size_t size, size_t cap)
{
    if (size < 24 || reorder_init(r, size, cap) < 0)
        return size < 24 ? error_set("report: a reorder record of %zu bytes has no sequence "
                                     "number",
                                     size)
                         : -1;
    r->by_seq = 1;
    return 0;
}

int reorder_init(struct reorder *r, size_t size, size_t cap)
{
    memset(r, 0, sizeof *r);
    r->size = size;
    r->cap = cap;
    r->v = malloc(size * (cap + 1)); /* + 1: scratch for swaps */
    if (!r->v)
        return error_set("report: out of memory for a %zu-record reorder window", cap);
    return 0;
}

void reorder_free(struct reorder *r)
{
    free(r->v);
    memset(r, 0, sizeof *r);
}

static unsigned char *at(struct reorder *r, size_t i)
{
    return r->v + i * r->size;
}

static void take_top(struct reorder *r, void *out)
{
    memcpy(out, at(r, 0), r->size);
    int64_t s = rec_start(out);
    if (r->any_out && s < r->last_start)
        r->late++;
    if (!r->any_out || s > r->last_start)
        r->last_start = s;
    r->any_out = 1;
    r->n--;
    if (r->n == 0)
        return;
    /* sift the last record down from the root */
    unsigned char *tmp = at(r, r->cap);
    memcpy(tmp, at(r, r->n), r->size);
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= r->n)
            break;
        if (c + 1 < r->n && rec_before(r, at(r, c + 1), at(r, c)))
            c++;
        if (!rec_before(r, at(r, c), tmp))
            break;
        memcpy(at(r, i), at(r, c), r->size);
        i = c;
    }
    memcpy(at(r, i), tmp, r->size);
}

int reorder_push(struct reorder *r, const void *rec, void *out)
{
    int popped = 0;
    if (r->n == r->cap) {
        /* the new record itself goes straight out when it is the earliest */
        if (r->n == 0 || !rec_before(r, at(r, 0), rec)) {
            memcpy(out, rec, r->size);
            int64_t s = rec_start(out);
            if (r->any_out && s < r->last_start)
                r->late++;
            if (!r->any_out || s > r->last_start)
                r->last_start = s;
            r->any_out = 1;
            return 1;
        }
        take_top(r, out);
        popped = 1;
    }
    size_t i = r->n++;
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!rec_before(r, rec, at(r, parent)))
            break;
        memcpy(at(r, i), at(r, parent), r->size);
        i = parent;
    }
    memcpy(at(r, i), rec, r->size);
    return popped;
}

int reorder_pop(struct reorder *r, void *out)
{
    if (r->n == 0)
        return 0;
    take_top(r, out);
    return 1;
}
