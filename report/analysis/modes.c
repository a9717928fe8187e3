/* modes.c — two groups of step times (modes.h). */
#include "report/analysis/modes.h"

#include "common/error.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int cmp_i64(const void *a, const void *b)
{
    const int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* the median of sorted v[0..n), n >= 1 */
static double median_ms(const int64_t *v, size_t n)
{
    const double lo = (double)v[(n - 1) / 2], hi = (double)v[n / 2];
    return 0.5 * (lo + hi) * 1e-6;
}

int modes_split(const int64_t *dur, size_t n, struct step_modes *out)
{
    memset(out, 0, sizeof *out);
    out->n = n;
    if (n < MODES_MIN_STEPS)
        return 0;
    int64_t *v = malloc(n * sizeof *v);
    double *s1 = malloc((n + 1) * sizeof *s1), *s2 = malloc((n + 1) * sizeof *s2);
    if (!v || !s1 || !s2) {
        free(v);
        free(s1);
        free(s2);
        return error_set("report: out of memory");
    }
    memcpy(v, dur, n * sizeof *v);
    qsort(v, n, sizeof *v, cmp_i64);
    /* prefix sums in ms, shifted by the median so the squares keep their precision */
    const double c = median_ms(v, n);
    s1[0] = s2[0] = 0.0;
    for (size_t i = 0; i < n; i++) {
        const double x = (double)v[i] * 1e-6 - c;
        s1[i + 1] = s1[i] + x;
        s2[i + 1] = s2[i] + x * x;
    }
    size_t min_group = (size_t)ceil(MODES_MIN_SHARE * (double)n);
    if (min_group < MODES_MIN_GROUP)
        min_group = MODES_MIN_GROUP;
    size_t best = 0;
    double best_ss = INFINITY;
    for (size_t k = min_group; k + min_group <= n; k++) { /* fast: v[0..k), slow: v[k..n) */
        const double a = s1[k], b = s1[n] - s1[k];
        const double ss = (s2[k] - a * a / (double)k) + (s2[n] - s2[k] - b * b / (double)(n - k));
        if (ss < best_ss) {
            best_ss = ss;
            best = k;
        }
    }
    if (best > 0) {
        const size_t k = best;
        const double mean_fast = s1[k] / (double)k, mean_slow = (s1[n] - s1[k]) / (double)(n - k);
        const double sd = sqrt(fmax(best_ss, 0.0) / (double)(n - 2));
        out->n_fast = k;
        out->n_slow = n - k;
        out->fast_ms = median_ms(v, k);
        out->slow_ms = median_ms(v + k, n - k);
        out->separation = sd > 0.0 ? (mean_slow - mean_fast) / sd : INFINITY;
        out->split_ns = v[k - 1] + (v[k] - v[k - 1]) / 2; /* midway across the gap */
        out->two = out->slow_ms >= MODES_MIN_RATIO * out->fast_ms &&
                   out->separation >= MODES_MIN_SEPARATION;
    }
    free(v);
    free(s1);
    free(s2);
    return 0;
}
