/* meta.h — a run's meta.csv, parsed once into one struct: a field per key of the run format
 * (probes/run_format.h, the table the trainer writes through), each parsed as its row's
 * type says, so the report reads `r->meta.world_size.i`, `r->meta.device.s` and
 * `meta_at(&r->meta.bucket_bytes, 3)` instead of looking keys up by name.  A key the
 * format does not know, an index that is no index, or a value not of its key's type is a
 * warning naming the file, line and key, and is left out (except world_size and the clock
 * offsets, without which no rank can be placed: an error).  Keys the format marks OLD
 * (earlier versions' runs) are read as any other. */
#ifndef DDPPROF_REPORT_META_H
#define DDPPROF_REPORT_META_H

#include <stddef.h>
#include <stdint.h>

#include "probes/run_format.h"

/* One value: s is the text as written (owned; NULL when the key is absent, or its value was
 * not of its type); for INT keys i and d hold the number, for NUM keys d. */
struct meta_value {
    const char *s;
    int64_t i;
    double d;
};

/* An indexed key's values: v[index] for index < n (v[0 .. the group's first) unused);
 * indexes never given have s NULL. */
struct meta_list {
    struct meta_value *v;
    int n;
};

struct run_meta {
#define META_FIELD_(key, type, unit, when, doc) struct meta_value key;
    RUN_META_KEYS(META_FIELD_)
#undef META_FIELD_
#define META_LIST_(group, leaf, type, unit, when, doc) struct meta_list group##_##leaf;
    RUN_META_INDEXED(META_LIST_)
#undef META_LIST_
    size_t rows; /* the file's rows, the header aside (0 for an import's own meta): any
                    count meta.csv gives is at most this (each item has its row) */
};

/* One row of a meta.csv as read (the CSV reader's): borrowed strings. */
struct meta_row {
    const char *key, *value;
    long line;
};

/* Parse rows[0..n) of the file `file` into m (zeroed, or holding earlier rows: a repeated
 * key, the last one counts).  Warnings for what is left out (report_warn); 0, or -1 after
 * error_set() (a bad world_size or clock offset, named with its file and line; out of
 * memory). */
int meta_parse(struct run_meta *m, const struct meta_row *rows, size_t n, const char *file);

/* Set fixed key k to value, as a row of meta.csv would (an import's own facts: its world
 * size, device, comm, mode); what names the run in a warning.  0, or -1 after error_set(). */
int meta_set(struct run_meta *m, enum run_meta_key k, const char *value, const char *what);

/* 1 when v is there and its text is exactly text ("cuda", "ddp") */
int meta_is(const struct meta_value *v, const char *text);

/* v's text as written, "" when absent */
const char *meta_text(const struct meta_value *v);

/* v's number (INT or NUM), or absent when v is NULL or not there */
double meta_num(const struct meta_value *v, double absent);

/* 1 with *out set when v is there and a finite number (nan and inf are NUM values) */
int meta_finite(const struct meta_value *v, double *out);

/* The value of l at index, or NULL when absent; its text, or NULL. */
const struct meta_value *meta_at(const struct meta_list *l, int index);
const char *meta_text_at(const struct meta_list *l, int index);

/* The entries of l that are there from index `from` on without a gap: the count of
 * param.0.name, param.1.name, ... */
int meta_run_of(const struct meta_list *l, int from);

void meta_free(struct run_meta *m);

/* An integer as a run directory's files write one (meta.csv's INT keys, the trace's integer
 * columns): s[0..len) decimal digits, an optional '-', at most 19 digits, within int64 and
 * above INT64_MIN.  0 with *out set, or -1. */
int meta_int_of(const char *s, size_t len, int64_t *out);

#endif
