/* test_report_sort.c — the report's radix sort and percentile: sort_by_i64 on records with
 * negative, equal, huge and small keys must give the same order as a stable comparison
 * sort (payloads of equal keys keep their order), for sizes on both sides of its
 * insertion-sort cutoff and with digits shared by every key; analysis_percentile is the
 * nearest-rank percentile of FORMULAS.md. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "report/analysis/analysis.h"
#include "report/input/sort.h"
#include "testutil.h"

struct rec {
    int32_t tag;
    int64_t key;
    int64_t payload;
};

/* A stable reference: insertion by (key, original position). */
static int cmp_ref(const void *a, const void *b)
{
    const struct rec *x = a, *y = b;
    if (x->key != y->key)
        return (x->key > y->key) - (x->key < y->key);
    return (x->payload > y->payload) - (x->payload < y->payload);
}

static void check_sort(size_t n, int kind, uint64_t *seed)
{
    struct rec *a = malloc((n + 1) * sizeof *a), *b = malloc((n + 1) * sizeof *b);
    for (size_t i = 0; i < n; i++) {
        double u = test_uniform(seed);
        int64_t k;
        switch (kind) {
        case 0: k = (int64_t)((u - 0.5) * 2e18); break;           /* full range, signed */
        case 1: k = (int64_t)(u * 50) - 25; break;                /* many equal keys */
        case 2: k = 5000000000LL + (int64_t)(u * 65536 * 3); break; /* shared high digits */
        default: k = (int64_t)(n - i); break;                     /* descending */
        }
        a[i] = (struct rec){.tag = (int32_t)i, .key = k, .payload = (int64_t)i};
    }
    if (kind == 0 && n > 2) {
        a[0].key = INT64_MIN;
        a[1].key = INT64_MAX;
    }
    memcpy(b, a, n * sizeof *a);
    qsort(b, n, sizeof *b, cmp_ref); /* payload = position: this is the stable order */
    CHECK(sort_by_i64(a, n, sizeof *a, offsetof(struct rec, key)) == 0, "sort failed");
    size_t bad = 0;
    for (size_t i = 0; i < n; i++)
        bad += a[i].key != b[i].key || a[i].payload != b[i].payload || a[i].tag != b[i].tag;
    CHECK(bad == 0, "n %zu kind %d: %zu records out of place", n, kind, bad);
    free(a);
    free(b);
}

int main(void)
{
    uint64_t seed = 42;
    static const size_t sizes[] = {0, 1, 2, 17, 64, 65, 1000, 100000};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
        for (int kind = 0; kind < 4; kind++)
            check_sort(sizes[s], kind, &seed);

    /* plain int64 arrays, as the phase durations are sorted */
    int64_t d[200];
    for (int i = 0; i < 200; i++)
        d[i] = (i * 7919) % 200; /* a permutation of 0..199 */
    CHECK(sort_by_i64(d, 200, sizeof *d, 0) == 0, "sort failed");
    int ok = 1;
    for (int i = 0; i < 200; i++)
        ok &= d[i] == i;
    CHECK(ok, "a permutation of 0..199 did not sort to 0..199");

    /* nearest rank: k = ceil(p n / 100) */
    int64_t v[20];
    for (int i = 0; i < 20; i++)
        v[i] = (i + 1) * 10;
    CHECK(analysis_percentile(v, 20, 95) == 190, "p95 of 20 is the 19th: %lld",
          (long long)analysis_percentile(v, 20, 95));
    CHECK(analysis_percentile(v, 20, 50) == 100, "p50 of 20 is the 10th");
    CHECK(analysis_percentile(v, 4, 50) == 20 && analysis_percentile(v, 4, 95) == 40,
          "p50/p95 of 4 are the 2nd and 4th");
    CHECK(analysis_percentile(v, 3, 50) == 20, "p50 of 3 is the 2nd (ceil 1.5)");
    CHECK(analysis_percentile(v, 1, 5) == 10 && analysis_percentile(v, 1, 100) == 10,
          "one value is every percentile");
    CHECK(analysis_percentile(v, 0, 50) == 0, "no values: 0");
    return test_finish();
}
