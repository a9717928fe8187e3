/* test_idx.c — the IDX loader on the real Fashion-MNIST (facts checked with Python's gzip
 * module when this test was written) and on every kind of bad file, each of which must
 * fail with one message naming the file and the problem. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "common/error.h"
#include "data/idx.h"
#include "testutil.h"

#define FASHION_DIR "/usr/share/datasets/fashion-mnist"

static float hexf(const char *s) { return strtof(s, NULL); }

static void test_fashion_mnist(void)
{
    struct idx_dataset train, test;
    CHECK(idx_load_split(FASHION_DIR, 1, &train) == 0, "train: %s", error_get());
    CHECK(idx_load_split(FASHION_DIR, 0, &test) == 0, "test: %s", error_get());
    if (!train.images || !test.images)
        return;
    CHECK(train.n == 60000 && train.rows == 28 && train.cols == 28, "train %d x %d x %d",
          train.n, train.rows, train.cols);
    CHECK(test.n == 10000 && test.rows == 28 && test.cols == 28, "test %d x %d x %d", test.n,
          test.rows, test.cols);
    CHECK(train.num_classes == 10 && test.num_classes == 10, "num_classes %d / %d",
          train.num_classes, test.num_classes);

    /* facts from gzip.open(...).read() in Python */
    CHECK(train.labels[0] == 9 && train.labels[59999] == 5, "train labels %d %d",
          train.labels[0], train.labels[59999]);
    CHECK(test.labels[0] == 9 && test.labels[9999] == 5, "test labels %d %d", test.labels[0],
          test.labels[9999]);
    long sum0 = 0, sum_test0 = 0;
    for (int i = 0; i < 784; i++) {
        sum0 += train.images[i];
        sum_test0 += test.images[i];
    }
    CHECK(sum0 == 76247, "sum of train image 0 = %ld", sum0);
    CHECK(sum_test0 == 33456, "sum of test image 0 = %ld", sum_test0);
    CHECK(train.images[14 * 28 + 14] == 217, "train image 0 pixel (14,14) = %d",
          train.images[14 * 28 + 14]);
    unsigned long long total = 0;
    for (size_t i = 0; i < (size_t)60000 * 784; i++)
        total += train.images[i];
    CHECK(total == 3431114169ull, "sum of all train pixels = %llu", total);
    int hist[256] = {0}, even = 1;
    for (int i = 0; i < 60000; i++)
        hist[train.labels[i]]++;
    for (int c = 0; c < 10; c++)
        even &= hist[c] == 6000;
    CHECK(even, "train labels are not 6000 per class");

    /* ToTensor + Normalize((0.2860,), (0.3530,)), expected values from torch 1.13 */
    int64_t idx[2] = {0, 59999};
    float *x = malloc(2 * 784 * sizeof *x);
    int32_t labels[2];
    CHECK(idx_to_float(&train, idx, 2, 0.2860f, 0.3530f, x, labels) == 0, "%s", error_get());
    CHECK(labels[0] == 9 && labels[1] == 5, "labels %d %d", labels[0], labels[1]);
    /* exact: the same float32 operations as torch, in the same order */
    CHECK(x[14 * 28 + 14] == hexf("0x1.99bb18p+0"), "normalised 217 = %a",
          (double)x[14 * 28 + 14]);
    CHECK(x[0] == hexf("-0x1.9ed252p-1"), "normalised 0 = %a", (double)x[0]);
    CHECK(idx_to_float(&test, NULL, 1, 0.0f, 1.0f, x, NULL) == 0, "%s", error_get());
    CHECK(x[14 * 28 + 14] == hexf("0x1.b9b9bap-2"), "110/255 = %a", (double)x[14 * 28 + 14]);
    int64_t bad_idx = 60000;
    error_clear();
    CHECK(idx_to_float(&train, &bad_idx, 1, 0.0f, 1.0f, x, NULL) == -1, "index 60000 accepted");
    CHECK(strstr(error_get(), "60000") != NULL, "message: %s", error_get());
    free(x);
    idx_free(&train);
    idx_free(&test);
    CHECK(train.images == NULL && train.n == 0, "idx_free leaves the struct zeroed");
}

/* ---- bad files ---- */

static char tmpdir[4096];

static void put_be32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

/* an IDX images file image of n x rows x cols with pixel i = i % 251; caller frees */
static uint8_t *make_images(uint32_t magic, uint32_t n, uint32_t rows, uint32_t cols,
                            size_t *len)
{
    size_t data = (size_t)n * rows * cols;
    uint8_t *b = malloc(16 + data);
    put_be32(b, magic);
    put_be32(b + 4, n);
    put_be32(b + 8, rows);
    put_be32(b + 12, cols);
    for (size_t i = 0; i < data; i++)
        b[16 + i] = (uint8_t)(i % 251);
    *len = 16 + data;
    return b;
}

static uint8_t *make_labels(uint32_t n, size_t *len)
{
    uint8_t *b = malloc(8 + n);
    put_be32(b, IDX_MAGIC_LABELS);
    put_be32(b + 4, n);
    for (uint32_t i = 0; i < n; i++)
        b[8 + i] = (uint8_t)(i % 10);
    *len = 8 + n;
    return b;
}

static void write_raw(const char *name, const void *data, size_t len)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", tmpdir, name);
    FILE *f = fopen(path, "wb");
    CHECK(f && fwrite(data, 1, len, f) == len, "cannot write %s", path);
    if (f)
        fclose(f);
}

/* gzip data in memory, caller frees */
static uint8_t *gzip_bytes(const void *data, size_t len, size_t *out_len)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/scratch.gz", tmpdir);
    gzFile g = gzopen(path, "wb");
    gzwrite(g, data, (unsigned)len);
    gzclose(g);
    FILE *f = fopen(path, "rb");
    fseek(f, 0, SEEK_END);
    *out_len = (size_t)ftell(f);
    rewind(f);
    uint8_t *b = malloc(*out_len);
    CHECK(fread(b, 1, *out_len, f) == *out_len, "reading back %s", path);
    fclose(f);
    unlink(path);
    return b;
}

static void clear_dir(void)
{
    const char *names[] = {"train-images-idx3-ubyte", "train-images-idx3-ubyte.gz",
                           "train-labels-idx1-ubyte", "train-labels-idx1-ubyte.gz"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char path[4200];
        snprintf(path, sizeof path, "%s/%s", tmpdir, names[i]);
        unlink(path);
    }
}

/* idx_load_split(tmpdir) must fail with a message containing each of the words */
static void expect_fail(const char *what, const char *w1, const char *w2, const char *w3)
{
    struct idx_dataset d;
    error_clear();
    int rc = idx_load_split(tmpdir, 1, &d);
    const char *msg = error_get();
    CHECK(rc == -1, "%s: loaded", what);
    CHECK(d.images == NULL && d.labels == NULL, "%s: output not left empty", what);
    const char *words[3] = {w1, w2, w3};
    for (int i = 0; i < 3; i++)
        if (words[i])
            CHECK(strstr(msg, words[i]) != NULL, "%s: message lacks \"%s\": %s", what, words[i],
                  msg);
    CHECK(strchr(msg, '\n') == NULL, "%s: message is not one line: %s", what, msg);
    if (rc == 0)
        idx_free(&d);
}

static void test_good_small_files(void)
{
    size_t il, ll, gl;
    uint8_t *im = make_images(IDX_MAGIC_IMAGES, 3, 5, 7, &il), *lb = make_labels(3, &ll);
    clear_dir();
    write_raw("train-images-idx3-ubyte", im, il);
    uint8_t *gz = gzip_bytes(lb, ll, &gl);
    write_raw("train-labels-idx1-ubyte.gz", gz, gl);
    struct idx_dataset d;
    CHECK(idx_load_split(tmpdir, 1, &d) == 0, "plain images + gzip labels: %s", error_get());
    CHECK(d.n == 3 && d.rows == 5 && d.cols == 7, "shape %d %d %d", d.n, d.rows, d.cols);
    CHECK(d.images && memcmp(d.images, im + 16, 105) == 0, "pixels differ");
    CHECK(d.labels && d.labels[2] == 2 && d.num_classes == 3, "labels / num_classes %d",
          d.num_classes);
    idx_free(&d);
    free(gz);
    free(im);
    free(lb);
}

static void test_bad_files(void)
{
    char path[4200];
    size_t il, ll, gl;
    struct idx_dataset d;

    error_clear();
    CHECK(idx_load_split("/nonexistent/ddpprof-data", 1, &d) == -1, "missing dir loaded");
    CHECK(strstr(error_get(), "/nonexistent/ddpprof-data") && strstr(error_get(), "missing"),
          "missing dir message: %s", error_get());

    clear_dir();
    expect_fail("missing file", "train-images-idx3-ubyte", "missing", tmpdir);

    uint8_t *lb = make_labels(3, &ll);
    uint8_t *im = make_images(IDX_MAGIC_LABELS, 3, 5, 7, &il);
    write_raw("train-labels-idx1-ubyte", lb, ll);
    expect_fail("images missing, labels present", "train-images-idx3-ubyte", "missing", NULL);

    write_raw("train-images-idx3-ubyte", im, il);
    expect_fail("wrong magic", "train-images-idx3-ubyte", "magic", "0x00000801");
    expect_fail("wrong magic (expected)", "0x00000803", NULL, NULL);
    free(im);

    im = make_images(IDX_MAGIC_IMAGES, 3, 5, 7, &il);
    write_raw("train-images-idx3-ubyte", im, il - 10);
    expect_fail("truncated data", "train-images-idx3-ubyte", "truncated", "got 95");
    write_raw("train-images-idx3-ubyte", im, 10);
    expect_fail("truncated header", "train-images-idx3-ubyte", "truncated", NULL);
    write_raw("train-images-idx3-ubyte", im, 2);
    expect_fail("truncated magic", "train-images-idx3-ubyte", "truncated", NULL);

    uint8_t *more = malloc(il + 3);
    memcpy(more, im, il);
    memset(more + il, 0, 3);
    write_raw("train-images-idx3-ubyte", more, il + 3);
    expect_fail("trailing bytes", "train-images-idx3-ubyte", "trailing", NULL);
    free(more);

    write_raw("train-images-idx3-ubyte", im, il);
    uint8_t *lb2 = make_labels(2, &ll);
    write_raw("train-labels-idx1-ubyte", lb2, ll);
    expect_fail("count mismatch", "train-labels-idx1-ubyte", "mismatch", "3 images");
    free(lb2);
    write_raw("train-labels-idx1-ubyte", lb, 8 + 3);

    uint8_t absurd[16];
    memcpy(absurd, im, 16);
    put_be32(absurd + 8, 0);
    write_raw("train-images-idx3-ubyte", absurd, 16);
    expect_fail("zero rows", "train-images-idx3-ubyte", "absurd", NULL);
    put_be32(absurd + 8, 28);
    put_be32(absurd + 4, 0xffffffffu);
    write_raw("train-images-idx3-ubyte", absurd, 16);
    expect_fail("4 billion images", "train-images-idx3-ubyte", "absurd", NULL);
    put_be32(absurd + 4, 90000000u);
    put_be32(absurd + 8, 4000);
    put_be32(absurd + 12, 4000);
    write_raw("train-images-idx3-ubyte", absurd, 16);
    expect_fail("too many bytes", "train-images-idx3-ubyte", "absurd", NULL);

    /* gzip: a good stream, then damaged copies of it */
    uint8_t *gz = gzip_bytes(im, il, &gl);
    clear_dir();
    write_raw("train-labels-idx1-ubyte", lb, 8 + 3);
    write_raw("train-images-idx3-ubyte.gz", gz, gl);
    CHECK(idx_load_split(tmpdir, 1, &d) == 0, "good gzip: %s", error_get());
    idx_free(&d);

    uint8_t *bad = malloc(gl);
    memcpy(bad, gz, gl);
    bad[10] = 0x07; /* first deflate block: BFINAL=1, BTYPE=11 (reserved) */
    write_raw("train-images-idx3-ubyte.gz", bad, gl);
    expect_fail("corrupt deflate data", "train-images-idx3-ubyte.gz", "gzip", "corrupt");

    memcpy(bad, gz, gl);
    bad[gl - 8] ^= 0xff; /* CRC-32 in the trailer */
    write_raw("train-images-idx3-ubyte.gz", bad, gl);
    expect_fail("gzip CRC mismatch", "train-images-idx3-ubyte.gz", "gzip", NULL);

    write_raw("train-images-idx3-ubyte.gz", gz, gl / 2);
    expect_fail("truncated gzip", "train-images-idx3-ubyte.gz", "gzip", "truncated");
    write_raw("train-images-idx3-ubyte.gz", gz, gl - 4);
    expect_fail("gzip trailer cut off", "train-images-idx3-ubyte.gz", "gzip", "truncated");
    free(bad);
    free(gz);

    /* a directory given as a file path, and a file given as the directory */
    snprintf(path, sizeof path, "%s/train-labels-idx1-ubyte", tmpdir);
    error_clear();
    CHECK(idx_load_split(path, 1, &d) == -1 && strstr(error_get(), "not a directory"),
          "file as directory: %s", error_get());
    clear_dir();
    free(im);
    free(lb);
}

int main(void)
{
    struct stat st;
    char *dir = test_tmpdir();
    CHECK(dir != NULL, "cannot create a temp directory");
    if (!dir)
        return test_finish();
    snprintf(tmpdir, sizeof tmpdir, "%s", dir);
    test_good_small_files();
    test_bad_files();
    rmdir(tmpdir);
    free(dir);
    if (stat(FASHION_DIR, &st) != 0) {
        if (test_failed) /* the bad-file checks ran: do not hide their failures */
            return test_finish();
        test_skip(FASHION_DIR " is missing: run scripts/setup (installs dataset-fashion-mnist)");
    }
    test_fashion_mnist();
    return test_finish();
}
