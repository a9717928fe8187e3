/* test_ptjson_stream.c — the PyTorch trace reader (report/input/ptjson.c) reads a file in chunks
 * (1 MiB, report/input/import_pytorch.c) as it reads it whole: the same events whatever the chunk
 * size, a token cut by a chunk's end included (escaped quotes, runs of backslashes, numbers
 * and literals at the cut); in time linear in a token's length (yajl alone re-lexed a cut
 * token on every chunk: a 256 MiB number took 153 s); and a token above PTJSON_TOKEN_MAX
 * (64 MiB) is refused with one line naming the input and the byte where it starts. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/error.h"
#include "report/input/ptjson.h"
#include "testutil.h"

/* What a parse delivered: the events folded into a hash (FNV-1a over every field). */
struct fold {
    uint64_t h, n;
};

static void fold_bytes(struct fold *f, const void *p, size_t n)
{
    const unsigned char *s = p;
    for (size_t i = 0; i < n; i++)
        f->h = (f->h ^ s[i]) * 1099511628211ull;
}

static int fold_event(void *ctx, const struct pt_event *e)
{
    struct fold *f = ctx;
    const int64_t v[] = {e->ph,          e->cat,        e->has_ts,     e->has_dur,
                         e->has_tid,     e->has_corr,   e->has_ext,    e->has_stream,
                         e->has_nelems,  e->has_out_nelems, e->has_dims0, e->bad_dur,
                         e->ts_ns,       e->dur_ns,     e->pid,        e->tid,
                         e->correlation, e->external_id, e->stream,   e->in_nelems,
                         e->out_nelems,  e->dims0,      (int64_t)e->name_len};
    fold_bytes(f, v, sizeof v);
    fold_bytes(f, e->name, e->name_len);
    fold_bytes(f, e->coll, strlen(e->coll));
    fold_bytes(f, e->dtype, strlen(e->dtype));
    fold_bytes(f, e->meta, strlen(e->meta));
    f->n++;
    return 0;
}

/* Parse buf[0..len) in chunks of `chunk` bytes (0: whole).  Returns ptjson_finish's code;
 * *out the events. */
static int parse_chunked(const char *buf, size_t len, size_t chunk, struct fold *out,
                         struct pt_header *hdr)
{
    *out = (struct fold){1469598103934665603ull, 0};
    struct ptjson *p = ptjson_new("test.json", fold_event, out);
    if (!p)
        return -2;
    int rc = 0;
    if (chunk == 0)
        chunk = len ? len : 1;
    for (size_t at = 0; at < len && rc == 0; at += chunk)
        rc = ptjson_feed(p, buf + at, len - at < chunk ? len - at : chunk);
    if (rc == 0)
        rc = ptjson_finish(p);
    if (hdr)
        *hdr = *ptjson_header(p);
    ptjson_free(p);
    return rc;
}

static void same_in_chunks(const char *what, const char *buf, size_t len)
{
    struct fold whole, part;
    struct pt_header hw, hp;
    int rw = parse_chunked(buf, len, 0, &whole, &hw);
    const size_t sizes[] = {1, 2, 3, 5, 7, 16, 61, 4096, 65536};
    for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
        int rp = parse_chunked(buf, len, sizes[k], &part, &hp);
        CHECK(rp == rw && part.n == whole.n && part.h == whole.h &&
                  hp.has_rank == hw.has_rank && hp.rank == hw.rank &&
                  hp.base_ns == hw.base_ns && hp.devices == hw.devices,
              "%s in chunks of %zu bytes: rc %d, %llu events (whole: rc %d, %llu events)%s",
              what, sizes[k], rp, (unsigned long long)part.n, rw,
              (unsigned long long)whole.n, part.h == whole.h ? "" : ", different events");
    }
}

static char *read_all(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *buf = NULL;
    size_t cap = 0, n = 0, got;
    do {
        if (n + 65536 > cap) {
            cap = 2 * cap + 65536;
            char *b = realloc(buf, cap);
            if (!b) {
                free(buf);
                fclose(f);
                return NULL;
            }
            buf = b;
        }
        got = fread(buf + n, 1, cap - n, f);
        n += got;
    } while (got > 0);
    fclose(f);
    *len = n;
    return buf;
}

static void test_chunks(void)
{
    /* the cuts that matter: inside a string after a backslash, between a backslash pair,
     * before an escaped quote; inside a number, at its end; inside a literal; a trace cut
     * short inside a string and inside a number */
    static const char *docs[] = {
        "{\"schemaVersion\":1,\"distributedInfo\":{\"rank\":3,\"world_size\":4},"
        "\"traceEvents\":[{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"a\\\"b\\\\\\\\\\\"c\\\\\","
        "\"pid\":1,\"tid\":\"t\\\\\",\"ts\":123.4567,\"dur\":-0.5e1,\"args\":{\"correlation\":"
        "1e3,\"stream\":7,\"Input Dims\":[[32,1,28,28],[]],\"x\":[true,false,null,1.5E-3]}},"
        "{\"ph\":\"X\",\"name\":\"\\\\\",\"ts\":1,\"dur\":2}],\"baseTimeNanoseconds\":"
        "1700000000000000000}",
        "[{\"name\":\"\\\\\\\\\\\\\\\\\",\"ph\":\"X\",\"ts\":10,\"dur\":100000000000000000000}]",
        "{\"traceEvents\":[{\"ph\":\"X\",\"name\":\"ProfilerStep#1\",\"ts\":1,\"dur\":2},"
        "{\"ph\":\"X\",\"name\":\"cut \\\"here",
        "{\"traceEvents\":[{\"ph\":\"X\",\"name\":\"n\",\"ts\":12345",
        "[1, 2, tru",
        "12345",
        "\"a string\"",
        "{\"traceEvents\":[{\"ph\":\"X\",\"name\":\"bad\\q\",\"ts\":1}]}",
        "[{\"name\":\"x\"}]garbage\"",
    };
    for (size_t i = 0; i < sizeof docs / sizeof *docs; i++) {
        char what[32];
        snprintf(what, sizeof what, "document %zu", i);
        same_in_chunks(what, docs[i], strlen(docs[i]));
    }
    const char *files[] = {"tests/fixtures/pytorch/kineto-2hosts/hostA_1001.1700000000123.pt.trace.json",
                           "tests/fixtures/pytorch/kineto-2hosts/hostB_1003.1700000000123.pt.trace.json"};
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        char *path = test_path(test_source_dir(), files[i]);
        size_t len = 0;
        char *buf = read_all(path, &len);
        CHECK(buf && len > 1000, "%s: cannot read the fixture", path);
        if (buf)
            same_in_chunks(files[i], buf, len);
        free(buf);
        free(path);
    }
}

/* One event whose name (or ts) is a token of n bytes (the number's: n + 1); *at (may be
 * NULL) gets the offset where the token starts (a string's opening quote). */
static char *long_token_trace(size_t n, int number, size_t *len, size_t *at)
{
    const char *pre = number ? "{\"traceEvents\":[{\"ph\":\"X\",\"name\":\"x\",\"ts\":1"
                             : "{\"traceEvents\":[{\"ph\":\"X\",\"name\":\"";
    const char *post = number ? ",\"dur\":2}]}" : "\",\"ts\":1,\"dur\":2}]}";
    const size_t a = strlen(pre), b = strlen(post);
    char *buf = malloc(a + n + b);
    if (!buf)
        return NULL;
    memcpy(buf, pre, a);
    memset(buf + a, number ? '0' : 'a', n);
    if (number)
        buf[a] = '1'; /* "1000...": the ts is 1 followed by n - 1 zeros */
    memcpy(buf + a + n, post, b);
    *len = a + n + b;
    if (at)
        *at = a - 1;
    return buf;
}

static double cpu_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* The CPU time of parsing a token of n bytes in 1 MiB chunks, as a file is read (the
 * least of 2 tries: the machine is shared).  Negative when the parse did not deliver the
 * one event. */
static double token_cpu_s(size_t n, int number)
{
    size_t len = 0;
    char *buf = long_token_trace(n, number, &len, NULL);
    if (!buf)
        return -1;
    double best = -1;
    for (int k = 0; k < 2; k++) {
        struct fold f;
        const double t0 = cpu_s();
        int rc = parse_chunked(buf, len, 1 << 20, &f, NULL);
        const double t = cpu_s() - t0;
        if (rc != 0 || f.n != 1) {
            best = -1;
            break;
        }
        best = best < 0 || t < best ? t : best;
    }
    free(buf);
    return best;
}

static void test_linear(void)
{
    for (int number = 0; number < 2; number++) {
        const char *kind = number ? "number" : "string";
        const double small = token_cpu_s(16u << 20, number);
        const double big = token_cpu_s(PTJSON_TOKEN_MAX, number);
        CHECK(small >= 0 && big >= 0, "a %s of 16 MiB or 64 MiB was not read as one event", kind);
        /* 4 times the bytes: linear is a ratio of 4, the quadratic lexing was 16; 8 leaves
         * room for a shared machine's noise (and the 10 ms below which CPU clocks are rough) */
        CHECK(big <= 8 * small + 0.01, "a %s token of 64 MiB took %.3f s, 16 MiB %.3f s: "
              "a ratio of %.1f, not linear (4)", kind, big, small, big / (small > 0 ? small : 1e-9));
        printf("a %s token in 1 MiB chunks: 16 MiB %.3f s, 64 MiB %.3f s (CPU)\n", kind, small,
               big);
    }
}

static void test_cap(void)
{
    for (int number = 0; number < 2; number++) {
        size_t len = 0, at = 0;
        char *buf = long_token_trace((size_t)PTJSON_TOKEN_MAX + 3, number, &len, &at);
        CHECK(buf, "out of memory");
        if (!buf)
            continue;
        struct fold f;
        int rc = parse_chunked(buf, len, 1 << 20, &f, NULL);
        const char *err = error_get();
        char want[96];
        snprintf(want, sizeof want, "test.json: a JSON %s longer than 64 MiB at byte %zu",
                 number ? "number" : "string", at);
        CHECK(rc == -1 && f.n == 0 && err && strstr(err, want) && !strchr(err, '\n'),
              "a %s of 64 MiB + 3 bytes: rc %d, %llu events, '%s' (want '%s')",
              number ? "number" : "string", rc, (unsigned long long)f.n, err ? err : "", want);
        free(buf);
    }
}

int main(void)
{
    test_chunks();
    test_cap();
    test_linear();
    return test_finish();
}
