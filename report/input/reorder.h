/* reorder.h — a bounded reorder window: records pushed in almost-sorted order come out
 * sorted, with memory fixed by the window, not by the input.  A min-heap of at most `cap`
 * fixed-size records; each record starts with two int64_t, its start and end, and records
 * leave in (start ascending, end descending) order, so an enclosing range leaves before
 * what it encloses.  A record pushed after a later one has already left (further out of
 * order than the window) still comes out, late; `late` counts them so the caller can say
 * its figures are approximate.  Used by the trace import (report/input/import_core.c) to walk
 * profiler events in time order without keeping them. */
#ifndef DDPPROF_REPORT_REORDER_H
#define DDPPROF_REPORT_REORDER_H

#include <stddef.h>
#include <stdint.h>

struct reorder {
    unsigned char *v; /* cap records of `size` bytes, a binary min-heap of n */
    size_t size, cap, n;
    int64_t last_start; /* the start of the last record out */
    int any_out;
    uint64_t late; /* records that came out before one that started earlier */
    int by_seq;    /* reorder_init_seq: ties broken by the third int64 */
};

/* An empty window of cap records of size bytes (size >= 16, a multiple of 8).  Returns 0,
 * or -1 after error_set() (out of memory).  Free with reorder_free. */
int reorder_init(struct reorder *r, size_t size, size_t cap);
void reorder_free(struct reorder *r);

/* The same, for records whose third int64 is a sequence number (size >= 24): records of the
 * same start and end leave in ascending sequence order (push order when it counts pushes),
 * as a stable sort would leave them. */
int reorder_init_seq(struct reorder *r, size_t size, size_t cap);

/* Push one record; when the window is full, the earliest record comes out into out first
 * (returns 1), else returns 0. */
int reorder_push(struct reorder *r, const void *rec, void *out);

/* Take the earliest record into out (returns 1), or return 0 when the window is empty. */
int reorder_pop(struct reorder *r, void *out);

#endif
