/* test_safetensors.c — safetensors writer and reader: byte-exact output against the
 * reference implementation's own test vectors and a Python-written golden file, round
 * trips of every dtype, atomic save (replacement and failed saves), one clear error for
 * each kind of malformed file, and how those errors show a name (text_printable: cut at a
 * UTF-8 boundary, never inside a character and never dropping a whole one). */
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/error.h"
#include "common/printable.h"
#include "io/json.h"
#include "io/safetensors.h"
#include "testutil.h"

static char tmpdir[4096];

static char *tmp_path(const char *name)
{
    static char path[4200];
    snprintf(path, sizeof path, "%s/%s", tmpdir, name);
    return path;
}

/* whole file into a new buffer; NULL if unreadable */
static unsigned char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    rewind(f);
    unsigned char *b = malloc((size_t)n + 1);
    *len = fread(b, 1, (size_t)n, f);
    fclose(f);
    return b;
}

static int file_equals(const char *path, const void *want, size_t want_len)
{
    size_t len;
    unsigned char *b = read_file(path, &len);
    int same = b && len == want_len && memcmp(b, want, len) == 0;
    free(b);
    return same;
}

/* entries in tmpdir whose name contains ".tmp-" (leftover temp files) */
static int count_temp_files(const char *dir)
{
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)))
        n += strstr(e->d_name, ".tmp-") != NULL;
    if (d)
        closedir(d);
    return n;
}

/* ---- byte-exact output: vectors from the reference implementation's tests ---- */

static void test_reference_bytes(void)
{
    const char *path = tmp_path("ref.safetensors");
    struct st_writer *w = st_writer_create();
    CHECK(st_writer_save(w, path) == 0, "%s", error_get());
    CHECK(file_equals(path, "\x08\0\0\0\0\0\0\0{}      ", 16), "empty file bytes differ");
    CHECK(st_writer_metadata(w, "framework", "pt") == 0, "%s", error_get());
    CHECK(st_writer_save(w, path) == 0, "%s", error_get());
    CHECK(file_equals(path, "\x28\0\0\0\0\0\0\0{\"__metadata__\":{\"framework\":\"pt\"}}     ",
                      48),
          "metadata-only file bytes differ");
    st_writer_free(w);

    const float v[6] = {0, 1, 2, 3, 4, 5};
    unsigned char want[8 + 72 + 24];
    const char *hdr = "{\"attn.0\":{\"dtype\":\"F32\",\"shape\":[1,2,3],\"data_offsets\":[0,24]}}";
    CHECK(strlen(hdr) == 64, "vector header length %zu", strlen(hdr));
    memcpy(want, "\x40\0\0\0\0\0\0\0", 8);
    memcpy(want + 8, hdr, 64);
    memcpy(want + 72, v, 24);
    w = st_writer_create();
    st_writer_add(w, "attn.0", ST_F32, 3, (const int64_t[]){1, 2, 3}, v);
    CHECK(st_writer_save(w, path) == 0, "%s", error_get());
    CHECK(file_equals(path, want, 8 + 64 + 24), "attn.0 file bytes differ");
    st_writer_free(w);

    /* a 65-byte header is padded with 7 spaces to 72 */
    hdr = "{\"attn0\":{\"dtype\":\"F32\",\"shape\":[1,1,2,3],\"data_offsets\":[0,24]}}       ";
    memcpy(want, "\x48\0\0\0\0\0\0\0", 8);
    memcpy(want + 8, hdr, 72);
    memcpy(want + 80, v, 24);
    w = st_writer_create();
    st_writer_add(w, "attn0", ST_F32, 4, (const int64_t[]){1, 1, 2, 3}, v);
    CHECK(st_writer_save(w, path) == 0, "%s", error_get());
    CHECK(file_equals(path, want, sizeof want), "attn0 (padded) file bytes differ");
    st_writer_free(w);
    unlink(path);
}

/* ---- the golden file written by tests/golden/make_golden_rng.py ---- */

static float hexf(const char *s) { return strtof(s, NULL); }

static void test_golden_tiny(void)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/tests/golden/tiny.safetensors", test_source_dir());
    struct st_file *st = st_open(path);
    CHECK(st != NULL, "%s", error_get());
    if (!st)
        return;
    CHECK(st_count(st) == 8, "%d tensors", st_count(st));
    CHECK(st_metadata_get(st, "format") && strcmp(st_metadata_get(st, "format"), "pt") == 0,
          "metadata format");
    const char *note = st_metadata_get(st, "note");
    CHECK(note && strcmp(note, "tab\there \"quoted\" caf\xc3\xa9") == 0, "metadata note: %s",
          note ? note : "(null)");

    float w[24];
    CHECK(st_read_f32(st, "conv1.weight", 4, (const int64_t[]){2, 3, 2, 2}, w) == 0, "%s",
          error_get());
    int ok = 1;
    for (int i = 0; i < 24; i++)
        ok &= w[i] == (float)i / 8 - 1; /* exact: multiples of 1/8 */
    CHECK(ok, "conv1.weight values");
    const struct st_tensor *t = st_find(st, "fc.bias");
    CHECK(t && t->dtype == ST_F32 && t->ndim == 1 && t->shape[0] == 3 && t->nbytes == 12,
          "fc.bias header");
    if (t) {
        const float *b = t->data;
        CHECK(b[0] == 0.5f && b[1] == -2.25f && b[2] == hexf("0x1.01b2b2p-25"), "fc.bias values");
    }
    t = st_find(st, "bn.num_batches_tracked");
    CHECK(t && t->dtype == ST_I64 && t->ndim == 0 && t->numel == 1 &&
              *(const int64_t *)t->data == -7,
          "scalar I64");
    float h[4];
    CHECK(st_read_f32(st, "half", 1, (const int64_t[]){4}, h) == 0, "%s", error_get());
    /* exact: values are torch's float16 values widened, including a subnormal (2^-24) */
    CHECK(h[0] == 1.0f && h[1] == -0.333251953125f && h[2] == 65504.0f &&
              h[3] == hexf("0x1p-24"),
          "half values %a %a %a %a", (double)h[0], (double)h[1], (double)h[2], (double)h[3]);
    float bf[4];
    CHECK(st_read_f32(st, "brain", 2, (const int64_t[]){2, 2}, bf) == 0, "%s", error_get());
    CHECK(bf[0] == 1.0f && bf[1] == -3.140625f && bf[2] == hexf("0x1.94p+99") &&
              bf[3] == 0.0078125f,
          "bf16 values");
    t = st_find(st, "ints");
    CHECK(t && t->dtype == ST_I32 && t->ndim == 2 && t->shape[0] == 1 && t->shape[1] == 3,
          "ints header");
    if (t) {
        const int32_t *x = t->data;
        CHECK(x[0] == INT32_MIN && x[1] == 0 && x[2] == INT32_MAX, "ints values");
    }
    t = st_find(st, "bytes");
    CHECK(t && t->dtype == ST_U8 && t->nbytes == 5 &&
              memcmp(t->data, "\x00\x01\x7f\x80\xff", 5) == 0,
          "U8 values");
    t = st_find(st, "empty");
    CHECK(t && t->numel == 0 && t->nbytes == 0 && t->ndim == 2 && t->shape[1] == 4,
          "zero-size tensor");
    for (int i = 0; i < st_count(st); i++) {
        const struct st_tensor *ti = st_get(st, i);
        CHECK((uintptr_t)ti->data % st_dtype_size(ti->dtype) == 0, "%s misaligned", ti->name);
    }

    /* errors of st_find / st_read_f32 name the file and tensor */
    error_clear();
    CHECK(st_find(st, "nope") == NULL && strstr(error_get(), "nope") &&
              strstr(error_get(), "tiny.safetensors"),
          "missing tensor: %s", error_get());
    CHECK(st_read_f32(st, "fc.bias", 1, (const int64_t[]){4}, w) == -1 &&
              strstr(error_get(), "[3]") && strstr(error_get(), "[4]"),
          "shape mismatch: %s", error_get());
    CHECK(st_read_f32(st, "ints", 2, (const int64_t[]){1, 3}, w) == -1 &&
              strstr(error_get(), "I32"),
          "integer tensor as float: %s", error_get());

    /* writing the same tensors back gives the golden bytes (the reference layout) */
    struct st_writer *wr = st_writer_create();
    for (int i = st_count(st) - 1; i >= 0; i--) { /* any insertion order */
        const struct st_tensor *ti = st_get(st, i);
        CHECK(st_writer_add(wr, ti->name, ti->dtype, ti->ndim, ti->shape, ti->data) == 0, "%s",
              error_get());
    }
    st_writer_metadata(wr, "note", note);
    st_writer_metadata(wr, "format", "pt");
    const char *copy = tmp_path("tiny-copy.safetensors");
    CHECK(st_writer_save(wr, copy) == 0, "%s", error_get());
    size_t glen;
    unsigned char *golden = read_file(path, &glen);
    CHECK(golden && file_equals(copy, golden, glen), "rewritten tiny.safetensors differs");
    free(golden);
    unlink(copy);
    st_writer_free(wr);
    st_close(st);
}

/* ---- round trip of every dtype ---- */

static void test_round_trip(void)
{
    float f32[2][3] = {{1.5f, -2.0f, 3.25f}, {1e-30f, -0.0f, 12345.678f}};
    uint16_t f16[5] = {0x3c00, 0xbc00, 0x7bff, 0x0001, 0x8000};
    uint16_t bf16[2] = {0x3f80, 0xc049};
    int64_t i64[2][2][2] = {{{1, -2}, {3, INT64_MIN}}, {{INT64_MAX, 0}, {7, 8}}};
    int32_t i32[1] = {-42};
    uint8_t u8[7] = {1, 2, 3, 4, 5, 6, 7};
    int64_t scalar_shape[1] = {0};
    struct st_writer *w = st_writer_create();
    CHECK(st_writer_add(w, "layer1.0.weight", ST_F32, 2, (const int64_t[]){2, 3}, f32) == 0,
          "%s", error_get());
    CHECK(st_writer_add(w, "h", ST_F16, 1, (const int64_t[]){5}, f16) == 0, "%s", error_get());
    CHECK(st_writer_add(w, "b", ST_BF16, 2, (const int64_t[]){2, 1}, bf16) == 0, "%s",
          error_get());
    CHECK(st_writer_add(w, "big", ST_I64, 3, (const int64_t[]){2, 2, 2}, i64) == 0, "%s",
          error_get());
    CHECK(st_writer_add(w, "scalar", ST_I32, 0, scalar_shape, i32) == 0, "%s", error_get());
    CHECK(st_writer_add(w, "u\xc3\xa9\"\\\n\x01", ST_U8, 1, (const int64_t[]){7}, u8) == 0,
          "%s", error_get());
    CHECK(st_writer_add(w, "none", ST_F32, 3, (const int64_t[]){4, 0, 2}, NULL) == 0, "%s",
          error_get());
    /* the data is copied: scribbling on it after add must not change the file */
    f32[0][0] = 99.0f;
    st_writer_metadata(w, "epoch", "3");
    st_writer_metadata(w, "z", "last");
    st_writer_metadata(w, "epoch", "4"); /* replaces */
    st_writer_metadata(w, "quote\"", "line\nbreak\ttab\x1f");

    error_clear();
    CHECK(st_writer_add(w, "h", ST_F32, 0, NULL, f32) == -1 && strstr(error_get(), "twice"),
          "duplicate name: %s", error_get());
    CHECK(st_writer_add(w, "__metadata__", ST_F32, 0, NULL, f32) == -1, "reserved name");
    CHECK(st_writer_add(w, "", ST_F32, 0, NULL, f32) == -1, "empty name");
    CHECK(st_writer_add(w, "bad\xff", ST_F32, 0, NULL, f32) == -1, "non-UTF-8 name");
    CHECK(st_writer_add(w, "neg", ST_F32, 1, (const int64_t[]){-1}, f32) == -1, "negative dim");
    CHECK(st_writer_add(w, "deep", ST_F32, 9, (const int64_t[]){1, 1, 1, 1, 1, 1, 1, 1, 1},
                        f32) == -1,
          "9 dims");

    const char *path = tmp_path("rt.safetensors");
    CHECK(st_writer_save(w, path) == 0, "%s", error_get());
    st_writer_free(w);

    struct st_file *st = st_open(path);
    CHECK(st != NULL, "%s", error_get());
    if (!st)
        return;
    CHECK(st_count(st) == 7, "%d tensors", st_count(st));
    const struct st_tensor *t = st_find(st, "layer1.0.weight");
    CHECK(t && t->dtype == ST_F32 && t->ndim == 2 && t->shape[0] == 2 && t->shape[1] == 3,
          "F32 header");
    f32[0][0] = 1.5f;
    CHECK(t && memcmp(t->data, f32, sizeof f32) == 0, "F32 data");
    t = st_find(st, "h");
    CHECK(t && t->dtype == ST_F16 && memcmp(t->data, f16, sizeof f16) == 0, "F16");
    t = st_find(st, "b");
    CHECK(t && t->dtype == ST_BF16 && t->shape[0] == 2 && t->shape[1] == 1 &&
              memcmp(t->data, bf16, sizeof bf16) == 0,
          "BF16");
    t = st_find(st, "big");
    CHECK(t && t->dtype == ST_I64 && t->ndim == 3 && memcmp(t->data, i64, sizeof i64) == 0,
          "I64");
    t = st_find(st, "scalar");
    CHECK(t && t->dtype == ST_I32 && t->ndim == 0 && t->numel == 1 &&
              *(const int32_t *)t->data == -42,
          "I32 scalar");
    t = st_find(st, "u\xc3\xa9\"\\\n\x01");
    CHECK(t && t->dtype == ST_U8 && memcmp(t->data, u8, 7) == 0, "U8 with an escaped name");
    t = st_find(st, "none");
    CHECK(t && t->numel == 0 && t->ndim == 3 && t->shape[1] == 0, "zero-size");
    CHECK(st_metadata_get(st, "epoch") && strcmp(st_metadata_get(st, "epoch"), "4") == 0,
          "metadata epoch");
    CHECK(st_metadata_get(st, "quote\"") &&
              strcmp(st_metadata_get(st, "quote\""), "line\nbreak\ttab\x1f") == 0,
          "metadata escapes");
    CHECK(st_metadata_get(st, "missing") == NULL, "absent metadata key");
    /* file order: I64 first, then F32, I32, BF16, F16, U8 (reference alignment order) */
    const char *order[7] = {"big", "layer1.0.weight", "none", "scalar", "b", "h", NULL};
    for (int i = 0; i < 6; i++)
        CHECK(strcmp(st_get(st, i)->name, order[i]) == 0, "tensor %d is %s, expected %s", i,
              st_get(st, i)->name, order[i]);
    st_close(st);
    unlink(path);
}

/* ---- atomic save ---- */

static struct st_writer *writer_with(float value, int64_t count)
{
    float *x = malloc((size_t)count * sizeof *x);
    for (int64_t i = 0; i < count; i++)
        x[i] = value;
    struct st_writer *w = st_writer_create();
    st_writer_add(w, "x", ST_F32, 1, &count, x);
    free(x);
    return w;
}

static float first_value(const char *path)
{
    struct st_file *st = st_open(path);
    const struct st_tensor *t = st ? st_find(st, "x") : NULL;
    float v = t ? *(const float *)t->data : -1.0f;
    st_close(st);
    return v;
}

static void test_atomic_save(void)
{
    const char *path = tmp_path("ckpt.safetensors");
    char saved_path[4200];
    snprintf(saved_path, sizeof saved_path, "%s", path);
    struct st_writer *a = writer_with(1.0f, 4), *b = writer_with(2.0f, 4);
    CHECK(st_writer_save(a, saved_path) == 0, "%s", error_get());
    CHECK(first_value(saved_path) == 1.0f, "first save");
    CHECK(st_writer_save(b, saved_path) == 0, "%s", error_get());
    CHECK(first_value(saved_path) == 2.0f, "second save did not replace the file");
    struct stat sb;
    mode_t mask = umask(0);
    umask(mask);
    CHECK(stat(saved_path, &sb) == 0 && (sb.st_mode & 0777) == (0666 & ~mask),
          "mode %o with umask %o (mkstemp's 0600 not widened?)", (unsigned)sb.st_mode,
          (unsigned)mask);
    CHECK(count_temp_files(tmpdir) == 0, "temp files left after good saves");

    /* a write that fails half way (file size limit: EFBIG, for root too) */
    struct st_writer *big = writer_with(3.0f, 1 << 18); /* 1 MiB of data */
    struct rlimit old, lim;
    getrlimit(RLIMIT_FSIZE, &old);
    lim = old;
    lim.rlim_cur = 64 * 1024;
    signal(SIGXFSZ, SIG_IGN);
    CHECK(setrlimit(RLIMIT_FSIZE, &lim) == 0, "setrlimit");
    error_clear();
    int rc = st_writer_save(big, saved_path);
    setrlimit(RLIMIT_FSIZE, &old);
    signal(SIGXFSZ, SIG_DFL);
    CHECK(rc == -1, "save past the file size limit succeeded");
    CHECK(strstr(error_get(), saved_path) && strstr(error_get(), "untouched"),
          "failed-write message: %s", error_get());
    CHECK(first_value(saved_path) == 2.0f, "failed save damaged the old file");
    CHECK(count_temp_files(tmpdir) == 0, "temp file left after a failed write");

    /* the target is a directory: rename fails, nothing left behind */
    char dirpath[4200];
    snprintf(dirpath, sizeof dirpath, "%s/adir", tmpdir);
    mkdir(dirpath, 0755);
    error_clear();
    CHECK(st_writer_save(a, dirpath) == -1 && strstr(error_get(), "rename"),
          "save over a directory: %s", error_get());
    CHECK(count_temp_files(tmpdir) == 0, "temp file left after a failed rename");
    rmdir(dirpath);

    /* a directory that does not exist */
    error_clear();
    CHECK(st_writer_save(a, "/nonexistent-ddpprof/x.safetensors") == -1 &&
              strstr(error_get(), "/nonexistent-ddpprof/x.safetensors"),
          "missing dir: %s", error_get());

    /* an unwritable directory (permission bits do not stop root, so only as a user) */
    if (geteuid() != 0) {
        chmod(tmpdir, 0555);
        error_clear();
        CHECK(st_writer_save(big, saved_path) == -1, "save into a read-only dir succeeded");
        chmod(tmpdir, 0755);
        CHECK(first_value(saved_path) == 2.0f, "failed save damaged the old file");
    }
    st_writer_free(a);
    st_writer_free(b);
    st_writer_free(big);
    unlink(saved_path);
}

/* ---- malformed files ---- */

/* write a file: 8-byte length of header, header, then datalen bytes 0, 1, 2, ... */
static const char *write_st(const char *header, size_t datalen)
{
    const char *path = tmp_path("bad.safetensors");
    FILE *f = fopen(path, "wb");
    size_t n = strlen(header);
    unsigned char len[8];
    for (int i = 0; i < 8; i++)
        len[i] = (unsigned char)((uint64_t)n >> (8 * i));
    fwrite(len, 1, 8, f);
    fwrite(header, 1, n, f);
    for (size_t i = 0; i < datalen; i++)
        fputc((int)(i & 0xff), f);
    fclose(f);
    return path;
}

static void expect_bad(const char *what, const char *path, const char *w1, const char *w2)
{
    error_clear();
    struct st_file *st = st_open(path);
    const char *msg = error_get();
    CHECK(st == NULL, "%s: opened", what);
    CHECK(strstr(msg, path) != NULL, "%s: message lacks the file name: %s", what, msg);
    CHECK(!w1 || strstr(msg, w1), "%s: message lacks \"%s\": %s", what, w1, msg);
    CHECK(!w2 || strstr(msg, w2), "%s: message lacks \"%s\": %s", what, w2, msg);
    CHECK(strchr(msg, '\n') == NULL, "%s: not one line: %s", what, msg);
    st_close(st);
}

#define T(name, dtype, shape, b, e)                                                          \
    "\"" name "\":{\"dtype\":\"" dtype "\",\"shape\":" shape ",\"data_offsets\":[" #b "," #e  \
    "]}"

static void test_malformed(void)
{
    const char *path;
    expect_bad("missing file", tmp_path("does-not-exist.safetensors"), "cannot open", NULL);

    path = tmp_path("bad.safetensors");
    FILE *f = fopen(path, "wb");
    fwrite("\x10\0\0", 1, 3, f);
    fclose(f);
    expect_bad("3-byte file", path, "too small", NULL);

    f = fopen(path, "wb");
    fwrite("\x00\x10\0\0\0\0\0\0{}", 1, 10, f);
    fclose(f);
    expect_bad("header length past the end", path, "larger than the file", "4096");

    path = write_st("{" T("a", "F32", "[1]", 0, 4), 4);
    expect_bad("unterminated object", path, "bad safetensors header", "expected ',' or '}'");
    path = write_st("{" T("a", "F32", "[1]", 0, 4) ",}", 4);
    expect_bad("trailing comma", path, "bad safetensors header", NULL);
    path = write_st("[1,2]", 0);
    expect_bad("not an object", path, "JSON object", NULL);
    path = write_st("", 0);
    expect_bad("empty header", path, "JSON object", NULL);
    path = write_st("{" T("a", "F32", "[1]", 0, 4) "}x", 4);
    expect_bad("bytes after the object", path, "after the header", NULL);
    path = write_st("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}\x01}", 4);
    expect_bad("control byte outside strings", path, "bad safetensors header", NULL);
    path = write_st("{\"a\xff\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4);
    expect_bad("invalid UTF-8", path, "UTF-8", NULL);
    path = write_st("{\"a\\q\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4);
    expect_bad("bad escape", path, "escape", NULL);
    path = write_st("{\"a\\ud800\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4);
    expect_bad("lone surrogate", path, "surrogate", NULL);
    path = write_st("{" T("a", "F64", "[1]", 0, 8) "}", 8);
    expect_bad("unknown dtype", path, "unsupported dtype \"F64\"", "\"a\"");
    path = write_st("{" T("a", "F32", "[-1]", 0, 4) "}", 4);
    expect_bad("negative dim", path, "negative", "\"a\"");
    path = write_st("{" T("a", "F32", "[1.0]", 0, 4) "}", 4);
    expect_bad("fractional dim", path, "integer", NULL);
    path = write_st("{" T("a", "F32", "[01]", 0, 4) "}", 4);
    expect_bad("leading zero", path, "leading zero", NULL);
    path = write_st("{" T("a", "F32", "[99999999999999999999]", 0, 4) "}", 4);
    expect_bad("huge integer", path, "too large", NULL);
    path = write_st("{" T("a", "F32", "[1,1,1,1,1,1,1,1,1]", 0, 4) "}", 4);
    expect_bad("9 dims", path, "more than 8", "\"a\"");
    path = write_st("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4,8]}}", 4);
    expect_bad("3 offsets", path, "more than 2", "\"a\"");
    path = write_st("{\"a\":{\"dtype\":\"F32\",\"data_offsets\":[0,4]}}", 4);
    expect_bad("no shape", path, "no \"shape\"", "\"a\"");
    path = write_st("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4],"
                    "\"dtype\":\"F32\"}}",
                    4);
    expect_bad("repeated key", path, "repeated key", "\"a\"");
    path = write_st("{" T("a", "F32", "[1]", 0, 4) "," T("a", "F32", "[1]", 4, 8) "}", 8);
    expect_bad("duplicate tensor", path, "twice", "\"a\"");
    path = write_st("{\"__metadata__\":{\"k\":1}}", 0);
    expect_bad("non-string metadata", path, "expected a string", NULL);
    path = write_st("{\"__metadata__\":{},\"__metadata__\":{}}", 0);
    expect_bad("metadata twice", path, "twice", NULL);

    path = write_st("{" T("a", "F32", "[2]", 0, 8) "}", 4);
    expect_bad("offsets out of range", path, "out of range", "\"a\"");
    path = write_st("{" T("a", "F32", "[3]", 0, 8) "}", 8);
    expect_bad("size != dtype x shape", path, "\"a\"", "need 12");
    path = write_st("{" T("a", "F32", "[1]", 8, 4) "}", 8);
    expect_bad("end before begin", path, "end before", "\"a\"");
    path = write_st("{" T("a", "F32", "[2]", 0, 8) "," T("b", "F32", "[2]", 4, 12) "}", 12);
    expect_bad("overlap", path, "overlap", "\"b\"");
    path = write_st("{" T("a", "F32", "[1]", 0, 4) "," T("b", "F32", "[1]", 8, 12) "}", 12);
    expect_bad("gap", path, "gap", "\"b\"");
    path = write_st("{" T("a", "F32", "[1]", 4, 8) "}", 8);
    expect_bad("data does not start at 0", path, "gap", "\"a\"");
    path = write_st("{" T("a", "F32", "[1]", 0, 4) "}", 8);
    expect_bad("data past the tensors", path, "cover 4 bytes", NULL);
    path = write_st("{" T("a", "F32", "[4611686018427387904,4]", 0, 4) "}", 4);
    expect_bad("shape overflow", path, "overflow", "\"a\"");
}

/* Lenient-but-valid headers: whitespace, escapes, any key order, misaligned offsets. */
static void test_valid_variants(void)
{
    const char *path = write_st(
        " {\n \"b\\u00e9\\ud83d\\ude00\\/\" : { \"data_offsets\" : [ 1 , 5 ] , \"shape\" : [ ] ,"
        " \"dtype\" : \"F32\" } ,\t\"__metadata__\":{\"k\\n\":\"v\\\"\"},"
        "\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}   ",
        5);
    struct st_file *st = st_open(path);
    CHECK(st != NULL, "valid header rejected: %s", error_get());
    if (!st)
        return;
    const struct st_tensor *t = st_find(st, "b\xc3\xa9\xf0\x9f\x98\x80/");
    CHECK(t != NULL, "escaped name not decoded: %s", error_get());
    if (t) {
        /* offset 1 is misaligned for F32: the reader copies it to an aligned place */
        CHECK((uintptr_t)t->data % 4 == 0, "F32 at offset 1 not aligned");
        CHECK(memcmp(t->data, "\x01\x02\x03\x04", 4) == 0, "misaligned tensor bytes");
    }
    CHECK(st_metadata_get(st, "k\n") && strcmp(st_metadata_get(st, "k\n"), "v\"") == 0,
          "escaped metadata");
    CHECK(st_count(st) == 2 && strcmp(st_get(st, 0)->name, "a") == 0, "data order");
    st_close(st);
    unlink(path);
}

/* text_printable's cut: a character the cut splits goes, one that ends at the cut stays */
static void test_printable(void)
{
    static const struct {
        const char *s;
        size_t max, cap;
        const char *want;
    } cases[] = {
        /* \xc3\xa9 is U+00E9, \xf0\x9f\x98\x80 U+1F600 ("" "" keeps b, c, d out of \x) */
        {"a\xc3\xa9" "bc", 3, TEXT_PRINTABLE_MAX, "a\xc3\xa9..."}, /* ends at the cut: kept */
        {"a\xc3\xa9" "bc", 2, TEXT_PRINTABLE_MAX, "a..."},        /* split: dropped whole */
        {"x\xf0\x9f\x98\x80y", 5, TEXT_PRINTABLE_MAX, "x\xf0\x9f\x98\x80..."},
        {"x\xf0\x9f\x98\x80y", 3, TEXT_PRINTABLE_MAX, "x..."},
        {"a\xc3\xa9", 3, TEXT_PRINTABLE_MAX, "a\xc3\xa9"},         /* no cut at all */
        {"x\xc3\xa9\n", 3, TEXT_PRINTABLE_MAX, "x\xc3\xa9..."},   /* a \n after the cut */
        /* cut by the buffer (cap) instead of max: room is kept for "..." and the NUL */
        {"ab\xc3\xa9" "cd", 80, 8, "ab\xc3\xa9..."},
        {"ab\xc3\xa9" "cd", 80, 7, "ab..."},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        char buf[TEXT_PRINTABLE_MAX];
        const char *got = text_printable(cases[k].s, cases[k].max, buf, cases[k].cap);
        CHECK(got == buf && strcmp(buf, cases[k].want) == 0,
              "text_printable('%s', max %zu, cap %zu) = '%s', want '%s'", cases[k].s,
              cases[k].max, cases[k].cap, buf, cases[k].want);
    }
}

int main(void)
{
    char *dir = test_tmpdir();
    CHECK(dir != NULL, "cannot create a temp directory");
    if (!dir)
        return test_finish();
    snprintf(tmpdir, sizeof tmpdir, "%s", dir);
    free(dir);
    test_reference_bytes();
    test_golden_tiny();
    test_round_trip();
    test_atomic_save();
    test_malformed();
    test_valid_variants();
    test_printable();
    unlink(tmp_path("bad.safetensors"));
    CHECK(rmdir(tmpdir) == 0, "temp dir not empty at the end");
    return test_finish();
}
