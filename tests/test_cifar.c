/* test_cifar.c — the CIFAR-10 loader, the synthetic set and the data set chooser
 * (trainer/data/cifar.c, synthetic.c, dataset.c) on files generated here.
 *
 * 1. A small CIFAR-10 set (6 batches of 7 records) loads: train = data_batch_1..5 in
 *    order, test = test_batch; labels and CHW pixels where they were written; floats are
 *    torchvision's ToTensor + Normalize with CIFAR-10's statistics, exactly.
 * 2. Bad inputs, one clear line each (one line, naming the file and what is wrong): a size
 *    that is not a multiple of 3073, an empty batch, a label above 9, a missing batch, a
 *    truncated batch (fewer records than data_batch_1.bin), a missing directory.
 * 3. cifar_parse on buffers alone (the entry point a fuzzer wraps): every length from 0 to
 *    3 records + 1 either parses to len / 3073 records or fails with one line.
 * 4. The synthetic set: 5000 / 1000 images of the asked shape, 10 classes all present,
 *    the same bytes for the same seed, others for another seed.
 * 5. --dataset auto: CIFAR-10 where the directory has it, else synthetic with a note that
 *    says accuracy is meaningless; IDX for 1-channel models. */
#include "common/error.h"
#include "data/cifar.h"
#include "data/dataset.h"
#include "data/synthetic.h"
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define RECORDS 7

static const char *batch_names[6] = {"data_batch_1.bin", "data_batch_2.bin",
                                     "data_batch_3.bin", "data_batch_4.bin",
                                     "data_batch_5.bin", "test_batch.bin"};

/* the pixel byte of record r of batch b at (channel, y, x): a function of all four */
static uint8_t pixel(int b, int r, int c, int y, int x)
{
    return (uint8_t)(b * 37 + r * 11 + c * 101 + y * 7 + x * 3);
}

static uint8_t label_of(int b, int r) { return (uint8_t)((b * RECORDS + r) % 10); }

/* batch b with `records` records (label override at record bad_rec when >= 0) plus
 * `extra` stray bytes, written as dir/name */
static void write_batch(const char *dir, const char *name, int b, int records, int bad_rec,
                        int bad_label, size_t extra)
{
    const size_t len = (size_t)records * CIFAR_RECORD_BYTES + extra;
    uint8_t *buf = calloc(len + 1, 1);
    for (int r = 0; r < records; r++) {
        uint8_t *rec = buf + (size_t)r * CIFAR_RECORD_BYTES;
        rec[0] = r == bad_rec ? (uint8_t)bad_label : label_of(b, r);
        for (int c = 0; c < 3; c++)
            for (int y = 0; y < 32; y++)
                for (int x = 0; x < 32; x++)
                    rec[1 + c * 1024 + y * 32 + x] = pixel(b, r, c, y, x);
    }
    test_write_file(dir, name, (const char *)buf, len);
    free(buf);
}

static char *make_set(void)
{
    char *dir = test_tmpdir();
    for (int b = 0; b < 6; b++)
        write_batch(dir, batch_names[b], b, RECORDS, -1, 0, 0);
    return dir;
}

/* 1 */
static void test_good_set(void)
{
    char *dir = make_set();
    struct dataset train, test;
    CHECK(cifar_load(dir, &train, &test) == 0, "load: %s", error_get());
    CHECK(train.n == 5 * RECORDS && test.n == RECORDS, "train %d test %d records", train.n,
          test.n);
    CHECK(train.c == 3 && train.h == 32 && train.w == 32 && train.num_classes == 10,
          "shape %dx%dx%d, %d classes", train.c, train.h, train.w, train.num_classes);
    int bad = 0;
    for (int i = 0; i < train.n + test.n; i++) {
        const struct dataset *d = i < train.n ? &train : &test;
        const int k = i < train.n ? i : i - train.n, b = i < train.n ? i / RECORDS : 5;
        const int r = k % RECORDS;
        bad += d->labels[k] != label_of(b, r);
        for (int c = 0; c < 3; c++)
            for (int y = 0; y < 32; y++)
                for (int x = 0; x < 32; x++)
                    bad += d->images[(size_t)k * 3072 + c * 1024 + y * 32 + x] !=
                           pixel(b, r, c, y, x);
    }
    CHECK(bad == 0, "%d labels or pixels are not where the batches put them", bad);
    /* two samples as floats: (v / 255 - mean[c]) / std[c] in float32 */
    const int64_t idx[2] = {12, 3};
    float *out = malloc(2 * 3072 * sizeof *out);
    int32_t labels[2];
    CHECK(dataset_to_float(&train, idx, 2, out, labels) == 0, "to_float: %s", error_get());
    bad = 0;
    for (int s = 0; s < 2; s++)
        for (int c = 0; c < 3; c++)
            for (int j = 0; j < 1024; j++) {
                const uint8_t v = train.images[idx[s] * 3072 + c * 1024 + j];
                const float want = ((float)v / 255.0f - dataset_cifar_mean[c]) /
                                   dataset_cifar_std[c];
                bad += out[s * 3072 + c * 1024 + j] != want;
            }
    CHECK(bad == 0 && labels[0] == train.labels[12] && labels[1] == train.labels[3],
          "%d floats differ from ToTensor + Normalize", bad);
    const int64_t outside = train.n;
    CHECK(dataset_to_float(&train, &outside, 1, out, NULL) == -1, "index %d accepted",
          train.n);
    free(out);
    dataset_free(&train);
    dataset_free(&test);
    free(dir);
}

/* cifar_load(dir) fails with one line holding every word of `want` */
static void expect_error(const char *case_name, const char *dir, const char *const *want)
{
    struct dataset train, test;
    const int rc = cifar_load(dir, &train, &test);
    const char *msg = error_get();
    CHECK(rc == -1, "%s: loaded", case_name);
    CHECK(train.n == 0 && !train.images && test.n == 0 && !test.images,
          "%s: a failed load left data behind", case_name);
    CHECK(strchr(msg, '\n') == NULL && strlen(msg) > 20, "%s: not one line: '%s'", case_name,
          msg);
    for (; *want; want++)
        CHECK(strstr(msg, *want) != NULL, "%s: '%s' lacks '%s'", case_name, msg, *want);
    printf("%s: %s\n", case_name, msg);
}

/* 2 */
static void test_bad_inputs(void)
{
    char *dir = make_set();
    write_batch(dir, "data_batch_2.bin", 1, RECORDS, -1, 0, 1000);
    expect_error("size not a multiple of 3073", dir,
                 (const char *const[]){"data_batch_2.bin", "not a whole number of 3073-byte",
                                       NULL});
    free(dir);

    dir = make_set();
    write_batch(dir, "test_batch.bin", 5, RECORDS, 4, 12, 0);
    expect_error("label > 9", dir,
                 (const char *const[]){"test_batch.bin", "record 4", "label 12", "0..9", NULL});
    free(dir);

    dir = make_set();
    char *gone = test_path(dir, "data_batch_4.bin");
    unlink(gone);
    free(gone);
    expect_error("missing batch", dir,
                 (const char *const[]){"data_batch_4.bin", "missing", "downloads nothing",
                                       NULL});
    free(dir);

    dir = make_set();
    write_batch(dir, "data_batch_3.bin", 2, RECORDS - 3, -1, 0, 0);
    expect_error("truncated file", dir,
                 (const char *const[]){"data_batch_3.bin", "truncated", "4 records", NULL});
    free(dir);

    /* a test batch of another size than the training batches is a set of its own (a
     * user's subset), not a truncated file: it loads, fewer records or more */
    for (int k = 0; k < 2; k++) {
        const int records = k ? RECORDS + 2 : RECORDS - 3;
        dir = make_set();
        write_batch(dir, "test_batch.bin", 5, records, -1, 0, 0);
        struct dataset train, test;
        CHECK(cifar_load(dir, &train, &test) == 0, "test batch of %d records: %s", records,
              error_get());
        CHECK(train.n == 5 * RECORDS && test.n == records, "train %d test %d records (want %d)",
              train.n, test.n, records);
        dataset_free(&train);
        dataset_free(&test);
        free(dir);
    }

    dir = make_set();
    write_batch(dir, "test_batch.bin", 5, RECORDS - 1, -1, 0, 2500); /* cut mid-record */
    expect_error("test batch cut mid-record", dir,
                 (const char *const[]){"test_batch.bin", "cut short", NULL});
    free(dir);

    dir = make_set();
    write_batch(dir, "data_batch_5.bin", 4, RECORDS - 1, -1, 0, 2500); /* cut mid-record */
    expect_error("cut mid-record", dir,
                 (const char *const[]){"data_batch_5.bin", "cut short", NULL});
    free(dir);

    dir = make_set();
    write_batch(dir, "data_batch_1.bin", 0, 0, -1, 0, 0);
    expect_error("empty batch", dir, (const char *const[]){"data_batch_1.bin", "empty", NULL});
    free(dir);

    expect_error("missing directory", "/nonexistent/ddpprof-cifar",
                 (const char *const[]){"/nonexistent/ddpprof-cifar", "missing", NULL});
}

/* 3 */
static void test_parse_buffers(void)
{
    const size_t most = 3 * CIFAR_RECORD_BYTES + 1;
    uint8_t *buf = malloc(most);
    for (size_t i = 0; i < most; i++)
        buf[i] = (uint8_t)(i % CIFAR_RECORD_BYTES == 0 ? i % 10 : i * 7);
    int wrong = 0, parsed = 0;
    for (size_t len = 0; len <= most; len++) {
        struct dataset d;
        const int rc = cifar_parse(buf, len, "buffer", &d);
        const int whole = len > 0 && len % CIFAR_RECORD_BYTES == 0;
        if (rc == 0) {
            parsed++;
            wrong += !whole || d.n != (int)(len / CIFAR_RECORD_BYTES) ||
                     d.labels[d.n - 1] != buf[(size_t)(d.n - 1) * CIFAR_RECORD_BYTES];
        } else {
            wrong += whole || d.images != NULL || strchr(error_get(), '\n') != NULL;
        }
        dataset_free(&d);
    }
    CHECK(wrong == 0 && parsed == 3, "cifar_parse over every length: %d wrong, %d parsed", wrong,
          parsed);
    free(buf);
}

/* 4 */
static void test_synthetic(void)
{
    struct dataset a, b, c, d;
    CHECK(synthetic_generate(3, 32, 32, 7, &a, &b) == 0, "synthetic: %s", error_get());
    CHECK(a.n == SYNTHETIC_TRAIN && b.n == SYNTHETIC_TEST && a.n == 5000 && b.n == 1000,
          "sizes %d, %d", a.n, b.n);
    CHECK(a.c == 3 && a.h == 32 && a.w == 32 && b.c == 3 && a.num_classes == 10, "shape");
    int seen[10] = {0}, bad = 0;
    for (int i = 0; i < a.n; i++) {
        bad += a.labels[i] > 9;
        if (a.labels[i] <= 9)
            seen[a.labels[i]] = 1;
    }
    int classes = 0;
    for (int k = 0; k < 10; k++)
        classes += seen[k];
    CHECK(bad == 0 && classes == 10, "labels: %d above 9, %d classes present", bad, classes);
    CHECK(synthetic_generate(3, 32, 32, 7, &c, &d) == 0, "again");
    CHECK(memcmp(a.images, c.images, (size_t)a.n * 3072) == 0 &&
              memcmp(a.labels, c.labels, (size_t)a.n) == 0 &&
              memcmp(b.images, d.images, (size_t)b.n * 3072) == 0,
          "the same seed gave another set");
    dataset_free(&c);
    dataset_free(&d);
    CHECK(synthetic_generate(3, 32, 32, 8, &c, &d) == 0, "seed 8");
    CHECK(memcmp(a.images, c.images, (size_t)a.n * 3072) != 0, "seed 8 gave seed 7's set");
    dataset_free(&a), dataset_free(&b), dataset_free(&c), dataset_free(&d);
    CHECK(synthetic_generate(0, 32, 32, 1, &a, &b) == -1, "0 channels accepted");
}

/* 5 */
static void test_auto(void)
{
    char *dir = make_set();
    struct dataset train, test;
    enum dataset_kind kind = DATASET_AUTO;
    char note[512];
    struct dataset_request rq = {.kind = DATASET_AUTO, .dir = dir, .c = 3, .h = 32, .w = 32,
                                 .seed = 1, .norm_mean = 0.0f, .norm_std = 1.0f};
    CHECK(dataset_open(&rq, &train, &test, &kind, note, sizeof note) == 0, "auto: %s",
          error_get());
    CHECK(kind == DATASET_CIFAR && train.n == 5 * RECORDS && note[0] == '\0',
          "auto with CIFAR files: %s, %d samples, note '%s'", dataset_kind_name(kind), train.n,
          note);
    dataset_free(&train), dataset_free(&test);

    rq.dir = "/nonexistent/ddpprof-cifar";
    CHECK(dataset_open(&rq, &train, &test, &kind, note, sizeof note) == 0, "auto: %s",
          error_get());
    CHECK(kind == DATASET_SYNTHETIC && train.n == 5000 && test.n == 1000 &&
              strstr(note, "meaningless") && strstr(note, "no CIFAR-10") && !strchr(note, '\n'),
          "auto without CIFAR files: %s, note '%s'", dataset_kind_name(kind), note);
    CHECK(train.mean[2] == dataset_cifar_mean[2] && train.std[0] == dataset_cifar_std[0],
          "synthetic CIFAR-shaped data is normalised as CIFAR-10");
    dataset_free(&train), dataset_free(&test);

    rq.kind = DATASET_CIFAR;
    CHECK(dataset_open(&rq, &train, &test, &kind, note, sizeof note) == -1 &&
              strstr(error_get(), "missing"),
          "--dataset cifar without files: '%s'", error_get());
    rq.kind = DATASET_SYNTHETIC;
    rq.dir = dir;
    rq.c = 1, rq.h = 28, rq.w = 28, rq.norm_mean = 0.5f, rq.norm_std = 0.25f;
    CHECK(dataset_open(&rq, &train, &test, &kind, note, sizeof note) == 0 && train.c == 1 &&
              train.h == 28 && train.mean[0] == 0.5f && train.std[0] == 0.25f &&
              strstr(note, "meaningless"),
          "synthetic 1x28x28: %s", error_get());
    dataset_free(&train), dataset_free(&test);
    rq.kind = DATASET_CIFAR; /* CIFAR-10 for a 1-channel model: the shapes disagree */
    CHECK(dataset_open(&rq, &train, &test, &kind, note, sizeof note) == -1 &&
              strstr(error_get(), "model takes 1x28x28"),
          "CIFAR-10 for a 1x28x28 model: '%s'", error_get());
    rq.kind = DATASET_AUTO; /* auto on a 1-channel model: IDX, which this directory lacks */
    CHECK(dataset_open(&rq, &train, &test, &kind, note, sizeof note) == -1 &&
              strstr(error_get(), "train-images-idx3-ubyte"),
          "auto for 1 channel is IDX: '%s'", error_get());
    free(dir);
}

int main(void)
{
    test_good_set();
    test_bad_inputs();
    test_parse_buffers();
    test_synthetic();
    test_auto();
    return test_finish();
}
