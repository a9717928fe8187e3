/* test_sampler.c — rng (mt19937, randperm, uniform_) and DistributedSampler against
 * PyTorch, bit for bit: the golden files come from the real torch 1.13 through
 * tests/golden/make_golden_rng.py. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/rng.h"
#include "common/vec.h"
#include "data/sampler.h"
#include "testutil.h"

/* Parse the numbers after " : " on line into a new array; *count gets their number. */
static int64_t *parse_list(const char *line, int64_t *count)
{
    const char *p = strstr(line, " : ");
    *count = 0;
    if (!p)
        return NULL;
    p += 3;
    size_t cap = 0;
    int64_t *v = NULL;
    char *end;
    for (;;) {
        if (VEC_RESERVE(v, cap, (size_t)*count + 1))
            abort();
        long long x = strtoll(p, &end, 10);
        if (end == p)
            break;
        v[(*count)++] = x;
        p = end;
    }
    return v;
}

static FILE *open_golden(const char *name)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/tests/golden/%s", test_source_dir(), name);
    FILE *f = fopen(path, "rb");
    CHECK(f != NULL, "cannot open %s (set DDPPROF_SOURCE_DIR to the source tree)", path);
    return f;
}

/* The C++ standard fixes std::mt19937's 10000th output for the default seed 5489:
 * an oracle for the engine that does not come from our own golden files. */
static void test_mt19937_standard(void)
{
    struct rng r;
    rng_seed(&r, 5489);
    uint32_t x = 0;
    for (int i = 0; i < 10000; i++)
        x = rng_next_u32(&r);
    CHECK(x == 4123659995u, "10000th output of mt19937(5489) = %" PRIu32, x);
}

static void test_randperm_golden(void)
{
    FILE *f = open_golden("randperm.txt");
    if (!f)
        return;
    char *line = NULL;
    size_t cap = 0;
    int perms = 0, uniforms = 0;
    while (getline(&line, &cap, f) > 0) {
        unsigned long long seed;
        long long n;
        char lo_s[64], hi_s[64];
        int count;
        if (sscanf(line, "randperm %llu %lld :", &seed, &n) == 2) {
            int64_t got_n, *want = parse_list(line, &got_n);
            CHECK(got_n == n, "golden line for seed %llu n %lld has %lld values", seed, n,
                  (long long)got_n);
            int64_t *out = malloc((size_t)(n ? n : 1) * sizeof *out);
            struct rng r;
            rng_seed(&r, seed);
            CHECK(rng_randperm(&r, n, out) == 0, "randperm(%lld): %s", n, error_get());
            int64_t bad = -1;
            for (int64_t i = 0; i < n && i < got_n && bad < 0; i++)
                if (out[i] != want[i])
                    bad = i;
            CHECK(bad < 0, "randperm seed %llu n %lld differs from torch at %lld: %lld vs %lld",
                  seed, n, (long long)bad, (long long)(bad >= 0 ? out[bad] : 0),
                  (long long)(bad >= 0 ? want[bad] : 0));
            free(out);
            free(want);
            perms++;
        } else if (sscanf(line, "uniform %llu %63s %63s %d :", &seed, lo_s, hi_s, &count) ==
                   4) {
            float lo = strtof(lo_s, NULL), hi = strtof(hi_s, NULL);
            const char *p = strstr(line, " : ") + 3;
            float *got = malloc((size_t)count * sizeof *got);
            struct rng r;
            rng_seed(&r, seed);
            rng_fill_uniform(&r, got, (size_t)count, lo, hi);
            int bad = -1;
            for (int i = 0; i < count; i++) {
                char *end;
                float want = strtof(p, &end); /* hex floats: exact */
                if (end == p || (got[i] != want && bad < 0))
                    bad = i;
                p = end;
            }
            /* exact equality: torch's uniform_ is reproduced bit for bit, no tolerance */
            CHECK(bad < 0, "uniform_ seed %llu [%g, %g) differs from torch at element %d", seed,
                  (double)lo, (double)hi, bad);
            free(got);
            uniforms++;
        }
    }
    free(line);
    fclose(f);
    CHECK(perms >= 10 && uniforms >= 3, "golden file has only %d randperm and %d uniform lines",
          perms, uniforms);
}

static void test_randperm_60000(void)
{
    FILE *f = open_golden("randperm_60000_seed0.u16");
    if (!f)
        return;
    enum { N = 60000 };
    static uint8_t raw[2 * N + 1];
    size_t got = fread(raw, 1, sizeof raw, f);
    fclose(f);
    CHECK(got == 2 * N, "randperm_60000_seed0.u16 has %zu bytes, expected %d", got, 2 * N);
    static int64_t out[N];
    struct rng r;
    rng_seed(&r, 0);
    CHECK(rng_randperm(&r, N, out) == 0, "%s", error_get());
    int bad = -1;
    for (int i = 0; i < N && bad < 0; i++)
        if (out[i] != (int64_t)(raw[2 * i] | raw[2 * i + 1] << 8))
            bad = i;
    CHECK(bad < 0, "randperm(60000) seed 0 differs from torch at index %d", bad);
}

static void test_randperm_errors(void)
{
    struct rng r;
    int64_t dummy;
    rng_seed(&r, 0);
    error_clear();
    CHECK(rng_randperm(&r, -1, &dummy) == -1, "negative n accepted");
    CHECK(strstr(error_get(), "negative") != NULL, "message: %s", error_get());
    CHECK(rng_randperm(&r, 0, &dummy) == 0, "n = 0 must give an empty permutation");
}

static void test_uniform_range(void)
{
    struct rng r;
    rng_seed(&r, 99);
    double sum = 0;
    int outside = 0;
    enum { N = 200000 };
    for (int i = 0; i < N; i++) {
        float u = rng_uniform(&r);
        outside += !(u >= 0.0f && u < 1.0f);
        sum += u;
    }
    CHECK(outside == 0, "%d draws outside [0, 1)", outside);
    /* mean of N uniforms has sd 1/sqrt(12 N) = 6.5e-4; 0.005 is ~8 sd */
    CHECK(sum / N > 0.495 && sum / N < 0.505, "mean of rng_uniform = %f", sum / N);
}

static int check_sampler(int64_t n, int world, int rank, int shuffle, int64_t seed,
                         int64_t epoch, int drop_last, const int64_t *want, int64_t count)
{
    struct sampler s;
    if (sampler_init(&s, n, world, rank, shuffle, seed, drop_last) != 0) {
        CHECK(0, "sampler_init(%lld, %d, %d): %s", (long long)n, world, rank, error_get());
        return -1;
    }
    sampler_set_epoch(&s, epoch);
    CHECK(sampler_num_samples(&s) == count,
          "n %lld world %d rank %d shuffle %d drop_last %d: num_samples %lld, torch %lld",
          (long long)n, world, rank, shuffle, drop_last, (long long)sampler_num_samples(&s),
          (long long)count);
    if (sampler_num_samples(&s) != count)
        return -1;
    int64_t *out = malloc((size_t)(count ? count : 1) * sizeof *out);
    CHECK(sampler_indices(&s, out) == 0, "%s", error_get());
    int same = 1;
    for (int64_t i = 0; i < count; i++)
        same &= out[i] == want[i];
    CHECK(same,
          "n %lld world %d rank %d shuffle %d seed %lld epoch %lld drop_last %d: indices "
          "differ from torch (first: %lld vs %lld)",
          (long long)n, world, rank, shuffle, (long long)seed, (long long)epoch, drop_last,
          (long long)(count ? out[0] : -1), (long long)(count ? want[0] : -1));
    free(out);
    return same ? 0 : -1;
}

/* The table from PyTorch's DistributedSampler blog: 2 ranks, shuffle, seed 0, epoch 0. */
static void test_sampler_blog_table(void)
{
    const int64_t one[] = {0}, two0[] = {0}, two1[] = {1}, three0[] = {2, 1},
                  three1[] = {0, 2};
    check_sampler(1, 2, 0, 1, 0, 0, 0, one, 1);
    check_sampler(1, 2, 1, 1, 0, 0, 0, one, 1);
    check_sampler(2, 2, 0, 1, 0, 0, 0, two0, 1);
    check_sampler(2, 2, 1, 1, 0, 0, 0, two1, 1);
    check_sampler(3, 2, 0, 1, 0, 0, 0, three0, 2);
    check_sampler(3, 2, 1, 1, 0, 0, 0, three1, 2);
}

static void test_sampler_golden(void)
{
    FILE *f = open_golden("sampler.txt");
    if (!f)
        return;
    char *line = NULL;
    size_t cap = 0;
    int cases = 0, failed = 0;
    while (getline(&line, &cap, f) > 0) {
        long long n, seed, epoch;
        int world, rank, shuffle, drop_last;
        if (sscanf(line, "sampler %lld %d %d %d %lld %lld %d :", &n, &world, &rank, &shuffle,
                   &seed, &epoch, &drop_last) != 7)
            continue;
        int64_t count, *want = parse_list(line, &count);
        failed += check_sampler(n, world, rank, shuffle, seed, epoch, drop_last, want, count) !=
                  0;
        free(want);
        cases++;
    }
    free(line);
    fclose(f);
    CHECK(cases >= 200, "sampler.txt has only %d cases", cases);
    CHECK(failed == 0, "%d of %d sampler cases differ from torch", failed, cases);
}

/* Epochs reshuffle; the ranks of one epoch partition the data set when it divides evenly. */
static void test_sampler_properties(void)
{
    enum { N = 60000, WORLD = 4 };
    static int64_t idx[WORLD][N / WORLD], first[N / WORLD];
    static int seen[N];
    for (int r = 0; r < WORLD; r++) {
        struct sampler s;
        sampler_init(&s, N, WORLD, r, 1, 0, 0);
        sampler_set_epoch(&s, 3);
        CHECK(sampler_indices(&s, idx[r]) == 0, "%s", error_get());
        for (int i = 0; i < N / WORLD; i++)
            seen[idx[r][i]]++;
    }
    int missing = 0;
    for (int i = 0; i < N; i++)
        missing += seen[i] != 1;
    CHECK(missing == 0, "%d indices not seen exactly once across ranks", missing);

    struct sampler s;
    sampler_init(&s, N, WORLD, 0, 1, 0, 0);
    sampler_set_epoch(&s, 4);
    sampler_indices(&s, first);
    CHECK(memcmp(first, idx[0], sizeof first) != 0, "epoch 3 and 4 give the same order");

    /* the single-process baseline (world 1) is torch.randperm seeded seed + epoch */
    static int64_t base[N], perm[N];
    sampler_init(&s, N, 1, 0, 1, 5, 0);
    sampler_set_epoch(&s, 2);
    sampler_indices(&s, base);
    struct rng r;
    rng_seed(&r, 7);
    rng_randperm(&r, N, perm);
    CHECK(memcmp(base, perm, sizeof base) == 0, "world-1 sampler != randperm(seed + epoch)");
}

static void test_sampler_errors(void)
{
    struct sampler s;
    error_clear();
    CHECK(sampler_init(&s, 10, 2, 2, 1, 0, 0) == -1, "rank 2 of 2 accepted");
    CHECK(strstr(error_get(), "rank 2") != NULL, "message: %s", error_get());
    CHECK(sampler_init(&s, 10, 0, 0, 1, 0, 0) == -1, "world 0 accepted");
    CHECK(sampler_init(&s, -1, 1, 0, 1, 0, 0) == -1, "negative size accepted");
    CHECK(sampler_init(&s, 0, 2, 1, 1, 0, 0) == 0 && sampler_num_samples(&s) == 0,
          "an empty data set gives 0 samples");
}

int main(void)
{
    test_mt19937_standard();
    test_randperm_golden();
    test_randperm_60000();
    test_randperm_errors();
    test_uniform_range();
    test_sampler_blog_table();
    test_sampler_golden();
    test_sampler_properties();
    test_sampler_errors();
    return test_finish();
}
