/* sort.c — radix sort (see sort.h): 16-bit digits, the four histograms counted in one
 * pass, digits shared by every key skipped; small arrays go to insertion sort. */
#include "report/input/sort.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"

#define SORT_SMALL 64

static uint64_t sort_key(const void *rec, size_t key_offset)
{
    int64_t k;
    memcpy(&k, (const char *)rec + key_offset, sizeof k);
    return (uint64_t)k ^ (1ull << 63); /* signed order as unsigned order */
}

static void sort_insertion(char *base, size_t n, size_t size, size_t key_offset, char *tmp)
{
    for (size_t i = 1; i < n; i++) {
        uint64_t k = sort_key(base + i * size, key_offset);
        size_t j = i;
        while (j > 0 && sort_key(base + (j - 1) * size, key_offset) > k)
            j--;
        if (j < i) {
            memcpy(tmp, base + i * size, size);
            memmove(base + (j + 1) * size, base + j * size, (i - j) * size);
            memcpy(base + j * size, tmp, size);
        }
    }
}

int sort_by_i64(void *base, size_t n, size_t size, size_t key_offset)
{
    char *a = base;
    if (n < 2)
        return 0;
    int sorted = 1;
    for (size_t i = 1; i < n && sorted; i++)
        sorted = sort_key(a + (i - 1) * size, key_offset) <= sort_key(a + i * size, key_offset);
    if (sorted)
        return 0;
    if (n <= SORT_SMALL) {
        char tmp[256];
        char *t = size <= sizeof tmp ? tmp : malloc(size);
        if (!t)
            return error_set("sort: out of memory for a %zu-byte record", size);
        sort_insertion(a, n, size, key_offset, t);
        if (t != tmp)
            free(t);
        return 0;
    }
    char *b = malloc(n * size);
    size_t(*count)[65536] = calloc(4, sizeof *count);
    if (!b || !count) {
        free(b);
        free(count);
        return error_set("sort: out of memory sorting %zu records of %zu bytes", n, size);
    }
    for (size_t i = 0; i < n; i++) {
        uint64_t k = sort_key(a + i * size, key_offset);
        for (int d = 0; d < 4; d++)
            count[d][(k >> (16 * d)) & 0xffff]++;
    }
    char *src = a, *dst = b;
    for (int d = 0; d < 4; d++) {
        uint64_t k0 = sort_key(src, key_offset);
        if (count[d][(k0 >> (16 * d)) & 0xffff] == n)
            continue; /* every key has this digit */
        size_t pos = 0;
        for (size_t v = 0; v < 65536; v++) {
            size_t c = count[d][v];
            count[d][v] = pos;
            pos += c;
        }
        for (size_t i = 0; i < n; i++) {
            const char *rec = src + i * size;
            size_t v = (sort_key(rec, key_offset) >> (16 * d)) & 0xffff;
            memcpy(dst + count[d][v]++ * size, rec, size);
        }
        char *t = src;
        src = dst;
        dst = t;
    }
    if (src != a)
        memcpy(a, src, n * size);
    free(b);
    free(count);
    return 0;
}

int sort_cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int sort_cmp_i64(const void *a, const void *b)
{
    const int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}
