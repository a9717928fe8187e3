/* test_common.c — the header-only growable array (common/vec.h), the clock
 * (common/clock.h) and the strict whole-number parser (common/parse.h): growth keeps the
 * items and grows geometrically, a reserve that cannot be met leaves the old block and
 * capacity as they were; the clock's three units agree, never go back, and a sleep lasts
 * at least as long as asked, signals or not; parse_i64 takes exactly '-'? digits+ in the
 * int64 range and nothing else; DDP's bucket assignment (common/ddp_buckets.h) gives
 * PyTorch's buckets, worked out by hand for a few caps; SHA-256 and HMAC-SHA256
 * (common/sha256.h) give FIPS 180-2's and RFC 4231's test vectors, in one piece and fed
 * byte by byte, and the constant-time compare tells equal from different; control bytes
 * (C0, DEL, C1 in UTF-8) are escaped in error messages and by the terminal stream, even a
 * C1 control split across two writes, and other UTF-8 passes; an option table
 * (common/options.h) parses flags, numbers, choices, lists and inputs into its struct, a later
 * option winning, says each bad command line in its one line, named for the command, and
 * prints a value back as it reads. */
#include "common/clock.h"
#include "common/error.h"
#include "common/printable.h"
#include "common/ddp_buckets.h"
#include "common/options.h"
#include "common/parse.h"
#include "common/sha256.h"
#include "common/vec.h"
#include "testutil.h"

#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

/* ------------------------------------------------------------------ vec.h */

static void test_vec_growth(void)
{
    int64_t *v = NULL;
    size_t cap = 0, reallocs = 0, bad_steps = 0;
    const size_t n = 100000;
    for (size_t i = 0; i < n; i++) {
        const size_t old_cap = cap;
        if (VEC_RESERVE(v, cap, i + 1)) {
            CHECK(0, "VEC_RESERVE failed growing to %zu items", i + 1);
            free(v);
            return;
        }
        if (cap != old_cap) {
            reallocs++;
            /* the first block is VEC_MIN_CAP items, every later one twice the last */
            if (old_cap ? cap != 2 * old_cap : cap != VEC_MIN_CAP) {
                if (!bad_steps++)
                    fprintf(stderr, "capacity went from %zu to %zu at %zu items\n", old_cap, cap,
                            i + 1);
            }
        }
        bad_steps += cap < i + 1;
        v[i] = (int64_t)(i * 7919u);
    }
    CHECK(bad_steps == 0, "%zu growth steps were not x2 from VEC_MIN_CAP or fell short",
          bad_steps);
    size_t bad = 0;
    for (size_t i = 0; i < n; i++)
        bad += v[i] != (int64_t)(i * 7919u);
    CHECK(bad == 0, "%zu of %zu items changed while the array grew", bad, n);
    /* 16 * 2^13 = 131072 >= 100000: 14 blocks in all, O(log n) copies */
    CHECK(reallocs == 14, "%zu reallocations for %zu appends, want 14", reallocs, n);
    CHECK(cap < 2 * n, "capacity %zu for %zu items: more than twice", cap, n);

    /* a need within the capacity changes nothing */
    int64_t *before = v;
    const size_t cap_before = cap;
    CHECK(VEC_RESERVE(v, cap, cap) == 0 && v == before && cap == cap_before,
          "a reserve within the capacity moved the block or changed the capacity");
    CHECK(VEC_RESERVE(v, cap, 0) == 0 && v == before && cap == cap_before,
          "reserving 0 items moved the block or changed the capacity");
    free(v);

    /* a need far above VEC_MIN_CAP from empty: one block, a power-of-two multiple */
    char *c = NULL;
    size_t ccap = 0;
    CHECK(VEC_RESERVE(c, ccap, 1000) == 0 && c && ccap == 1024,
          "reserving 1000 bytes from empty gave capacity %zu, want 1024", ccap);
    memset(c, 'x', ccap); /* the whole capacity is usable */
    free(c);
}

static void test_vec_failure(void)
{
    double *v = NULL;
    size_t cap = 0;
    CHECK(VEC_RESERVE(v, cap, 40) == 0, "reserve of 40 doubles failed");
    for (int i = 0; i < 40; i++)
        v[i] = i + 0.5;
    double *const block = v;
    const size_t cap_before = cap;

    /* needs whose byte count overflows size_t: refused, nothing changed */
    const size_t overflowing[] = {SIZE_MAX, SIZE_MAX / 2 + 2, SIZE_MAX / sizeof *v + 1};
    for (size_t k = 0; k < sizeof overflowing / sizeof overflowing[0]; k++) {
        const int rc = VEC_RESERVE(v, cap, overflowing[k]);
        CHECK(rc == -1, "reserving %zu doubles returned %d, want -1", overflowing[k], rc);
        CHECK(v == block && cap == cap_before,
              "a failed reserve of %zu moved the block (%p -> %p) or the capacity (%zu -> %zu)",
              overflowing[k], (void *)block, (void *)v, cap_before, cap);
    }

#if !defined(__SANITIZE_ADDRESS__)
    /* a size that fits size_t but no address space (2^60 bytes): realloc fails, and the
     * old block must survive it (ASan aborts on such a request instead of failing it) */
    const int rc = VEC_RESERVE(v, cap, (size_t)1 << 57);
    CHECK(rc == -1, "reserving 2^57 doubles (2^60 bytes) returned %d, want -1", rc);
    CHECK(v == block && cap == cap_before, "a failed realloc moved the block or the capacity");
#endif

    int intact = 1;
    for (int i = 0; i < 40; i++)
        intact &= v[i] == i + 0.5;
    CHECK(intact, "the old block's items changed after failed reserves");
    /* and it still grows afterwards */
    CHECK(VEC_RESERVE(v, cap, cap + 1) == 0 && cap == 2 * cap_before && v[39] == 39.5,
          "growing after a failure: capacity %zu, want %zu", cap, 2 * cap_before);
    free(v);
}

/* ------------------------------------------------------------------ clock.h */

static void test_clock_units(void)
{
    for (int i = 0; i < 1000; i++) {
        const int64_t ns0 = clock_now_ns();
        const double s = clock_now_s();
        const int64_t ms = clock_now_ms();
        const int64_t ns1 = clock_now_ns();
        CHECK(ns1 >= ns0, "clock_now_ns went back: %lld then %lld", (long long)ns0,
              (long long)ns1);
        /* s is a double of ~1e5 s of uptime: 1e-11 s resolution, 1 us of slack is plenty */
        CHECK(s >= ns0 * 1e-9 - 1e-6 && s <= ns1 * 1e-9 + 1e-6,
              "clock_now_s %.9f outside [%.9f, %.9f] of clock_now_ns", s, ns0 * 1e-9,
              ns1 * 1e-9);
        CHECK(ms >= ns0 / 1000000 && ms <= ns1 / 1000000,
              "clock_now_ms %lld outside [%lld, %lld] of clock_now_ns", (long long)ms,
              (long long)(ns0 / 1000000), (long long)(ns1 / 1000000));
        if (test_failed)
            break;
    }
}

static volatile sig_atomic_t alarms;

static void on_alarm(int sig)
{
    (void)sig;
    alarms++;
}

static void test_clock_sleep(void)
{
    const int waits_ms[] = {0, 1, 30, 120};
    for (size_t k = 0; k < sizeof waits_ms / sizeof waits_ms[0]; k++) {
        const int ms = waits_ms[k];
        const int64_t t0 = clock_now_ns();
        clock_sleep_ms(ms);
        const double slept_ms = (clock_now_ns() - t0) / 1e6;
        CHECK(slept_ms >= ms, "clock_sleep_ms(%d) slept %.3f ms", ms, slept_ms);
        /* an upper bound only against a hang: a loaded 2-core machine may be late */
        CHECK(slept_ms < ms + 5000.0, "clock_sleep_ms(%d) took %.3f ms", ms, slept_ms);
    }

    /* a signal every 7 ms (handler without SA_RESTART) must not cut a 150 ms sleep short */
    struct sigaction sa = {.sa_handler = on_alarm}, old;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGALRM, &sa, &old);
    const struct itimerval every = {{0, 7000}, {0, 7000}}, off = {{0, 0}, {0, 0}};
    alarms = 0;
    setitimer(ITIMER_REAL, &every, NULL);
    const int64_t t0 = clock_now_ns();
    clock_sleep_ms(150);
    const double slept_ms = (clock_now_ns() - t0) / 1e6;
    setitimer(ITIMER_REAL, &off, NULL);
    sigaction(SIGALRM, &old, NULL);
    CHECK(alarms > 0, "no SIGALRM arrived during the sleep: the test proved nothing");
    CHECK(slept_ms >= 150.0, "clock_sleep_ms(150) slept %.3f ms across %d signals", slept_ms,
          (int)alarms);
}

/* ------------------------------------------------------------------ parse.h */

static void test_parse_i64(void)
{
    static const struct {
        const char *s;
        size_t len;
        int ok;
        int64_t want;
    } cases[] = {
        {"0", 1, 1, 0},
        {"-0", 2, 1, 0},
        {"42", 2, 1, 42},
        {"-17", 3, 1, -17},
        {"0000000000000000000000000000123", 31, 1, 123}, /* leading zeros, any number */
        {"9223372036854775807", 19, 1, INT64_MAX},
        {"-9223372036854775808", 20, 1, INT64_MIN},
        {"9223372036854775808", 19, 0, 0}, /* one past INT64_MAX */
        {"-9223372036854775809", 20, 0, 0},
        {"99999999999999999999", 20, 0, 0},
        {"", 0, 0, 0},
        {"-", 1, 0, 0},
        {"+1", 2, 0, 0},
        {" 1", 2, 0, 0},
        {"1 ", 2, 0, 0},
        {"--1", 3, 0, 0},
        {"1-", 2, 0, 0},
        {"0x10", 4, 0, 0},
        {"1e3", 3, 0, 0},
        {"12\0" "3", 4, 0, 0}, /* a NUL byte inside */
        {"12", 1, 1, 1},       /* only len bytes are read */
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        int64_t v = -12345;
        const int rc = parse_i64(cases[k].s, cases[k].len, &v);
        if (cases[k].ok)
            CHECK(rc == 0 && v == cases[k].want, "parse_i64('%.*s') = %d, %lld; want %lld",
                  (int)cases[k].len, cases[k].s, rc, (long long)v, (long long)cases[k].want);
        else
            CHECK(rc == -1 && v == -12345, "parse_i64 took '%.*s' (%zu bytes): %d, %lld",
                  (int)cases[k].len, cases[k].s, cases[k].len, rc, (long long)v);
    }
}

/* reverse order, first cap min(first, cap), a bucket closes at >= its limit while a
 * parameter is left; the answers worked by hand */
static void test_ddp_buckets(void)
{
    static const size_t bytes[4] = {300, 200, 300, 400};
    static const struct {
        size_t first, cap;
        int want_n, want[4];
    } cases[] = {
        {1 << 20, 250, 3, {2, 2, 1, 0}},  /* 400 | 300 | 200+300 (the last keeps the rest) */
        {1 << 20, 1200, 1, {0, 0, 0, 0}}, /* all 1200 bytes: reaching the cap at i = 0 */
        {300, 500, 3, {2, 1, 1, 0}},      /* first 300: 400 | 300+200 | 300 */
        {1 << 20, 700, 2, {1, 1, 0, 0}},  /* 400+300 | 200+300 */
        {1, 1, 4, {3, 2, 1, 0}},          /* every parameter its own bucket */
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        int got[4] = {-1, -1, -1, -1};
        int n = ddp_buckets_assign(bytes, 4, cases[k].first, cases[k].cap, got);
        CHECK(n == cases[k].want_n, "case %zu: %d buckets, want %d", k, n, cases[k].want_n);
        for (int i = 0; i < 4; i++)
            CHECK(got[i] == cases[k].want[i], "case %zu: parameter %d in bucket %d, want %d", k,
                  i, got[i], cases[k].want[i]);
    }
    CHECK(ddp_buckets_assign(bytes, 0, 1, 1, NULL) == 0, "no parameters: no bucket");
    CHECK(ddp_bucket_cap_bytes(25.0) == 25u << 20, "25 MB = %zu bytes", ddp_bucket_cap_bytes(25.0));
    CHECK(ddp_bucket_cap_bytes(0.05) == 52428, "0.05 MB = %zu bytes", ddp_bucket_cap_bytes(0.05));
}

/* ------------------------------------------------------------------ sha256.h */

static void hex_of(const uint8_t *p, size_t n, char *out)
{
    for (size_t i = 0; i < n; i++)
        sprintf(out + 2 * i, "%02x", p[i]);
}

static void test_sha256_vectors(void)
{
    static const struct {
        const char *msg, *digest;
    } fips[] = { /* FIPS 180-2, appendix B, and the empty message */
        {"abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
        {"", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
        {"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
         "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"},
    };
    uint8_t d[SHA256_BYTES];
    char hex[2 * SHA256_BYTES + 1];
    for (size_t i = 0; i < sizeof fips / sizeof fips[0]; i++) {
        sha256(fips[i].msg, strlen(fips[i].msg), d);
        hex_of(d, sizeof d, hex);
        CHECK(strcmp(hex, fips[i].digest) == 0, "sha256('%s') = %s, want %s", fips[i].msg, hex,
              fips[i].digest);
        struct sha256 s; /* the same fed one byte at a time */
        sha256_init(&s);
        for (const char *p = fips[i].msg; *p; p++)
            sha256_update(&s, p, 1);
        sha256_final(&s, d);
        hex_of(d, sizeof d, hex);
        CHECK(strcmp(hex, fips[i].digest) == 0, "sha256('%s') byte by byte = %s", fips[i].msg,
              hex);
    }
    /* a million 'a' (FIPS 180-2 B.3), in pieces of 1000 that straddle the 64-byte blocks */
    char a[1000];
    memset(a, 'a', sizeof a);
    struct sha256 s;
    sha256_init(&s);
    for (int i = 0; i < 1000; i++)
        sha256_update(&s, a, sizeof a);
    sha256_final(&s, d);
    hex_of(d, sizeof d, hex);
    CHECK(strcmp(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0") == 0,
          "sha256 of a million 'a' = %s", hex);
}

static void test_hmac_vectors(void)
{
    uint8_t k20b[20], kaa20[20], k25[25], k0c[20], kaa131[131], ddd[50], dcd[50];
    memset(k20b, 0x0b, sizeof k20b);
    memset(kaa20, 0xaa, sizeof kaa20);
    for (int i = 0; i < 25; i++)
        k25[i] = (uint8_t)(i + 1);
    memset(k0c, 0x0c, sizeof k0c);
    memset(kaa131, 0xaa, sizeof kaa131);
    memset(ddd, 0xdd, sizeof ddd);
    memset(dcd, 0xcd, sizeof dcd);
    static const char big_data[] =
        "This is a test using a larger than block-size key and a larger than block-size data. "
        "The key needs to be hashed before being used by the HMAC algorithm.";
    const struct {
        const void *key;
        size_t klen;
        const void *msg;
        size_t mlen;
        const char *mac; /* the first strlen/2 bytes (case 5 is truncated to 128 bits) */
    } rfc[] = { /* RFC 4231, section 4, HMAC-SHA-256 */
        {k20b, 20, "Hi There", 8,
         "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"},
        {"Jefe", 4, "what do ya want for nothing?", 28,
         "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"},
        {kaa20, 20, ddd, 50, "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe"},
        {k25, 25, dcd, 50, "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b"},
        {k0c, 20, "Test With Truncation", 20, "a3b6167473100ee06e0c796c2955552b"},
        {kaa131, 131, "Test Using Larger Than Block-Size Key - Hash Key First", 54,
         "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"},
        {kaa131, 131, big_data, sizeof big_data - 1,
         "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2"},
    };
    for (size_t i = 0; i < sizeof rfc / sizeof rfc[0]; i++) {
        uint8_t mac[SHA256_BYTES];
        char hex[2 * SHA256_BYTES + 1];
        hmac_sha256(rfc[i].key, rfc[i].klen, rfc[i].msg, rfc[i].mlen, mac);
        hex_of(mac, sizeof mac, hex);
        size_t want = strlen(rfc[i].mac);
        CHECK(strncmp(hex, rfc[i].mac, want) == 0, "RFC 4231 case %zu: %s, want %s", i + 1,
              hex, rfc[i].mac);
        struct hmac_sha256 h; /* in two parts, split mid-message */
        hmac_sha256_init(&h, rfc[i].key, rfc[i].klen);
        hmac_sha256_update(&h, rfc[i].msg, rfc[i].mlen / 3);
        hmac_sha256_update(&h, (const char *)rfc[i].msg + rfc[i].mlen / 3,
                           rfc[i].mlen - rfc[i].mlen / 3);
        hmac_sha256_final(&h, mac);
        hex_of(mac, sizeof mac, hex);
        CHECK(strncmp(hex, rfc[i].mac, want) == 0, "RFC 4231 case %zu in parts: %s", i + 1,
              hex);
    }
    uint8_t x[32] = {0}, y[32] = {0};
    CHECK(mem_equal_ct(x, y, sizeof x) == 1, "equal bytes compared unequal");
    y[31] = 1;
    CHECK(mem_equal_ct(x, y, sizeof x) == 0, "a difference in the last byte went unseen");
    y[31] = 0;
    y[0] = 0x80;
    CHECK(mem_equal_ct(x, y, sizeof x) == 0, "a difference in the first byte went unseen");
}

/* ------------------------------------------------------------------ printable.h */

static void test_printable(void)
{
    char buf[256];
    CHECK(strcmp(text_printable("a\x1b]0;t\x07" "b\n\xc2\x9b" "2J \xc3\xa9", (size_t)-1, buf,
                                sizeof buf),
                 "a\\x1b]0;t\\x07b\\n\\xc2\\x9b2J \xc3\xa9") == 0,
          "escaped: '%s'", buf);
    error_set("open '%s': no", "x\ny\x1b[2J");
    CHECK(strcmp(error_get(), "open 'x\\ny\\x1b[2J': no") == 0, "error_set kept '%s'",
          error_get());
    error_set("%s", error_get()); /* escaping twice changes nothing */
    CHECK(strcmp(error_get(), "open 'x\\ny\\x1b[2J': no") == 0, "re-set: '%s'", error_get());
    error_clear();
    char *mem = NULL;
    size_t len = 0;
    FILE *to = open_memstream(&mem, &len);
    FILE *f = to ? text_terminal_stream(to) : NULL;
    CHECK(f != NULL, "text_terminal_stream");
    if (f) {
        fputs("row\tcell \x1b]0;t\x07 \xc2", f);
        fflush(f); /* the C1 control split across two writes */
        fputs("\x9b" "2J \xc2\xa9\r\n", f);
        fclose(f);
        fclose(to);
        CHECK(mem && strcmp(mem, "row\tcell \\x1b]0;t\\x07 \\xc2\\x9b2J \xc2\xa9\\r\n") == 0,
              "the terminal stream wrote '%s'", mem ? mem : "(null)");
    }
    free(mem);
}

/* ------------------------------------------------------------------ options.h */

struct demo {
    int flag, n, items[3], nitems, choice;
    double x;
    const char *s, *inputs[4];
    int ninputs;
};

static const struct opt_choice demo_choices[] = {{"a", 0}, {"b", 7}, {NULL, 0}};

static const struct opt demo_opts[] = {
    {"--flag", "-f", OPT_FLAG, 0, OPT_FIELD(struct demo, flag), .flag_value = 1},
    {"--n", NULL, OPT_INT, 0, OPT_FIELD(struct demo, n), .min = 1, .max = 9},
    {"--x", NULL, OPT_DOUBLE, 0, OPT_FIELD(struct demo, x), .min = 0, .max = 1},
    {"--s", NULL, OPT_STRING, 0, OPT_FIELD(struct demo, s)},
    {"--items", NULL, OPT_LIST, 0, OPT_LIST_FIELD(struct demo, items, nitems), .item = OPT_INT,
     .min = 0, .max = 5, .what = "an item"},
    {"--choice", NULL, OPT_ENUM, 0, OPT_FIELD(struct demo, choice), .choices = demo_choices},
};

static int demo_input(void *ctx, const char *arg)
{
    struct demo *d = ctx;
    if (d->ninputs == 4)
        return error_set("demo: too many inputs");
    d->inputs[d->ninputs++] = arg;
    return 0;
}

/* parse the NULL-terminated words (after "demo") into *d: opt_parse's status */
static int demo_parse(struct demo *d, uint64_t *given, char **words)
{
    struct opt_parser p = {.opts = demo_opts, .nopts = 6, .command = "demo",
                           .positional = demo_input, .ctx = d};
    int n = 0;
    while (words[n])
        n++;
    memset(d, 0, sizeof *d);
    error_clear();
    return opt_parse(&p, d, n, words, 0, given);
}

static void test_options(void)
{
    struct demo d;
    uint64_t given;
    char *good[] = {"in1", "-f", "--n", "3", "--x", "0.25", "--s", "-", "--items", "1,0,5",
                    "--choice", "b", "in2", "--n", "4", NULL};
    CHECK(demo_parse(&d, &given, good) == 0, "a good line: %s", error_get());
    CHECK(d.flag == 1 && d.n == 4 && d.x == 0.25 && strcmp(d.s, "-") == 0 && d.nitems == 3 &&
              d.items[0] == 1 && d.items[2] == 5 && d.choice == 7,
          "values: flag %d n %d x %g items %d choice %d", d.flag, d.n, d.x, d.nitems, d.choice);
    CHECK(d.ninputs == 2 && strcmp(d.inputs[1], "in2") == 0, "inputs: %d", d.ninputs);
    const struct opt_parser p = {.opts = demo_opts, .nopts = 6};
    CHECK(opt_given(&p, given, "--n") && opt_given(&p, given, "-f") &&
              !opt_given(&p, given, "--nope"),
          "given bits %llx", (unsigned long long)given);
    char buf[64];
    CHECK(opt_format(&demo_opts[4], &d, buf, sizeof buf) && strcmp(buf, "1,0,5") == 0,
          "--items as text: '%s'", buf);
    CHECK(opt_format(&demo_opts[5], &d, buf, sizeof buf) && strcmp(buf, "b") == 0,
          "--choice as text: '%s'", buf);
    d.x = 0.1;
    CHECK(opt_format(&demo_opts[2], &d, buf, sizeof buf) && strcmp(buf, "0.1") == 0,
          "--x 0.1 as text: '%s' (the fewest digits that read back)", buf);

    static const struct {
        char *words[5];
        const char *want;
    } bad[] = {
        {{"--bogus", NULL}, "demo: unknown option '--bogus' (see ddpprof demo --help)"},
        {{"--n", NULL}, "demo: --n needs a value (see ddpprof demo --help)"},
        {{"--n", "3x", NULL}, "demo: --n: '3x' is not an integer in [1, 9]"},
        {{"--n", "10", NULL}, "demo: --n: '10' is not an integer in [1, 9]"},
        {{"--x", "nan", NULL}, "demo: --x: 'nan' is not a number in [0, 1]"},
        {{"--items", "1,9", NULL}, "demo: --items: '9' is not an item in [0, 5]"},
        {{"--items", "1,,2", NULL}, "demo: --items: '1,,2' is not a list of at most 3 items "
                                    "separated by commas"},
        {{"--items", "1,2,3,4", NULL}, "demo: --items: '1,2,3,4' is not a list of at most 3 "
                                       "items separated by commas"},
        {{"--items", "1,", NULL}, "demo: --items: '1,' is not a list of at most 3 items "
                                  "separated by commas"},
        {{"--choice", "c", NULL}, "demo: --choice: 'c' is not a or b"},
        {{"a", "b", "c", "d", NULL}, NULL}, /* 4 inputs: taken */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int rc = demo_parse(&d, NULL, (char **)bad[i].words);
        if (!bad[i].want)
            CHECK(rc == 0, "%s...: %s", bad[i].words[0], error_get());
        else
            CHECK(rc == -1 && strcmp(error_get(), bad[i].want) == 0, "%s...: '%s', want '%s'",
                  bad[i].words[0], error_get(), bad[i].want);
    }
    char *five[] = {"a", "b", "c", "d", "e", NULL};
    CHECK(demo_parse(&d, NULL, five) == -1 && strcmp(error_get(), "demo: too many inputs") == 0,
          "an input refused: '%s'", error_get());
    /* a command that takes no input, and has no name of its own */
    struct opt_parser bare = {.opts = demo_opts, .nopts = 6};
    char *stray[] = {"stray"};
    memset(&d, 0, sizeof d);
    CHECK(opt_parse(&bare, &d, 1, stray, 0, NULL) == -1 &&
              strcmp(error_get(), "unexpected argument 'stray' (see ddpprof --help)") == 0,
          "stray: '%s'", error_get());
}

int main(void)
{
    test_vec_growth();
    test_vec_failure();
    test_clock_units();
    test_clock_sleep();
    test_parse_i64();
    test_ddp_buckets();
    test_sha256_vectors();
    test_hmac_vectors();
    test_printable();
    test_options();
    return test_finish();
}
