/* vec.h — the growable array: one reserve step for every array that grows by appending.
 *
 * An array is a plain pointer plus a size_t capacity (in items) kept by its owner beside
 * the count:
 *
 *     struct run_row *rows = NULL;  size_t n = 0, cap = 0;
 *     if (VEC_RESERVE(rows, cap, n + 1))
 *         return error_set("%s: out of memory growing to %zu rows", path, n + 1);
 *     rows[n++] = row;
 *     ...
 *     free(rows);
 *
 * VEC_RESERVE grows geometrically (x2, at least VEC_MIN_CAP items), so n appends cost
 * O(n) copies.  On failure nothing changes (the old block and capacity stay valid) and it
 * returns -1 without setting a message: the caller knows what it was growing and says so.
 * Header-only, no dependencies. */
#ifndef DDPPROF_VEC_H
#define DDPPROF_VEC_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define VEC_MIN_CAP 16

/* Make *items (an array of elem-byte items, capacity *cap) hold at least need items.
 * items points at the array pointer (any object pointer type).  0 or -1 (out of memory or
 * a size that overflows). */
static inline int vec_reserve_bytes(void *items, size_t *cap, size_t elem, size_t need)
{
    if (need <= *cap)
        return 0;
    size_t c = *cap ? *cap : VEC_MIN_CAP;
    while (c < need) {
        if (c > SIZE_MAX / 2)
            return -1;
        c *= 2;
    }
    if (elem && c > SIZE_MAX / elem)
        return -1;
    void *old;
    memcpy(&old, items, sizeof old); /* the pointer of any object type, as void * */
    void *p = realloc(old, c * elem);
    if (!p)
        return -1;
    memcpy(items, &p, sizeof p);
    *cap = c;
    return 0;
}

/* VEC_RESERVE(ptr, cap, need): ptr an lvalue pointer, cap its size_t capacity. */
#define VEC_RESERVE(ptr, cap, need) vec_reserve_bytes(&(ptr), &(cap), sizeof *(ptr), (need))

#endif
