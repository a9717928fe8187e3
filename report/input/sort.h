/* sort.h — a stable LSD radix sort of fixed-size records by a signed 64-bit key field,
 * for the report's big sorts (durations, intervals, per-step marks): linear time, where
 * qsort's comparison calls dominated the analysis of a million-row trace. */
#ifndef DDPPROF_REPORT_SORT_H
#define DDPPROF_REPORT_SORT_H

#include <stddef.h>

/* Sort n records of size bytes at base, ascending by the int64_t at key_offset in each
 * record; equal keys keep their order.  Returns 0, or -1 after error_set() (out of memory
 * for the n * size scratch copy). */
int sort_by_i64(void *base, size_t n, size_t size, size_t key_offset);

/* qsort/bsearch comparators, ascending: of doubles (NaN as equal to everything: keep them
 * out), of int64_t */
int sort_cmp_double(const void *a, const void *b);
int sort_cmp_i64(const void *a, const void *b);

#endif
