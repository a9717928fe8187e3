/* cifar.c — CIFAR-10 binary batches (see cifar.h). */
#include "data/cifar.h"

#include "common/error.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define CIFAR_CLASSES 10
#define CIFAR_MAX_BYTES ((size_t)1 << 31) /* 2 GiB: far above a real batch (30.7 MB) */

static const char cifar_get_it[] =
    "the CIFAR-10 binary version (cifar-10-binary.tar.gz, extracted: cifar-10-batches-bin/) "
    "has data_batch_1.bin .. data_batch_5.bin and test_batch.bin; ddpprof downloads nothing "
    "(or use --dataset synthetic)";

int cifar_parse(const uint8_t *buf, size_t len, const char *name, struct dataset *out)
{
    memset(out, 0, sizeof *out);
    if (len == 0)
        return error_set("%s: empty (0 bytes): not a CIFAR-10 binary batch", name);
    if (len % CIFAR_RECORD_BYTES != 0)
        return error_set("%s: %zu bytes is not a whole number of %d-byte CIFAR-10 records "
                         "(1 label byte + 3x32x32 pixel bytes): %zu records and %zu bytes "
                         "over; not a CIFAR-10 binary batch, or cut short",
                         name, len, CIFAR_RECORD_BYTES, len / CIFAR_RECORD_BYTES,
                         len % CIFAR_RECORD_BYTES);
    const size_t n = len / CIFAR_RECORD_BYTES;
    if (n > (size_t)0x7fffffff)
        return error_set("%s: %zu records: too many for one batch", name, n);
    for (size_t i = 0; i < n; i++) {
        const uint8_t label = buf[i * CIFAR_RECORD_BYTES];
        if (label >= CIFAR_CLASSES)
            return error_set("%s: record %zu (byte %zu) has label %u; CIFAR-10 labels are "
                             "0..9 (CIFAR-100's binary files have 2 label bytes per record "
                             "and are not read)",
                             name, i, i * CIFAR_RECORD_BYTES, (unsigned)label);
    }
    out->images = malloc(n * CIFAR_IMAGE_BYTES);
    out->labels = malloc(n);
    if (!out->images || !out->labels) {
        dataset_free(out);
        return error_set("%s: out of memory for %zu records", name, n);
    }
    for (size_t i = 0; i < n; i++) {
        const uint8_t *rec = buf + i * CIFAR_RECORD_BYTES;
        out->labels[i] = rec[0];
        memcpy(out->images + i * CIFAR_IMAGE_BYTES, rec + 1, CIFAR_IMAGE_BYTES);
    }
    out->n = (int)n;
    out->c = 3;
    out->h = out->w = 32;
    out->num_classes = CIFAR_CLASSES;
    return 0;
}

/* the whole of path, *len bytes (caller frees); NULL + error_set */
static uint8_t *cifar_read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        if (errno == ENOENT)
            error_set("%s: missing: %s", path, cifar_get_it);
        else
            error_set("%s: cannot open: %s", path, strerror(errno));
        return NULL;
    }
    struct stat sb;
    if (fstat(fileno(f), &sb) != 0 || !S_ISREG(sb.st_mode)) {
        fclose(f);
        error_set("%s: not a regular file: pass the directory that holds the CIFAR-10 batches",
                  path);
        return NULL;
    }
    if ((size_t)sb.st_size > CIFAR_MAX_BYTES) {
        fclose(f);
        error_set("%s: %lld bytes: far too big for a CIFAR-10 batch (30,730,000 bytes)", path,
                  (long long)sb.st_size);
        return NULL;
    }
    const size_t size = (size_t)sb.st_size;
    uint8_t *buf = malloc(size ? size : 1);
    if (!buf) {
        fclose(f);
        error_set("%s: out of memory for %zu bytes", path, size);
        return NULL;
    }
    const size_t got = fread(buf, 1, size, f);
    const int bad = ferror(f);
    fclose(f);
    if (bad || got != size) {
        free(buf);
        error_set("%s: read %zu of %zu bytes: %s", path, got, size,
                  bad ? "read error" : "the file shrank while it was read");
        return NULL;
    }
    *len = size;
    return buf;
}

/* file dir/name parsed into *out; 0 or -1 */
static int cifar_load_batch(const char *dir, const char *name, struct dataset *out)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    size_t len = 0;
    uint8_t *buf = cifar_read_file(path, &len);
    if (!buf)
        return -1;
    int rc = cifar_parse(buf, len, path, out);
    free(buf);
    return rc;
}

/* append src's records to dst (dst may be empty); frees src */
static int cifar_append(struct dataset *dst, struct dataset *src)
{
    if (dst->n == 0) {
        dataset_free(dst);
        *dst = *src;
        memset(src, 0, sizeof *src);
        return 0;
    }
    const size_t n = (size_t)dst->n + (size_t)src->n;
    uint8_t *images = realloc(dst->images, n * CIFAR_IMAGE_BYTES);
    if (images)
        dst->images = images;
    uint8_t *labels = images ? realloc(dst->labels, n) : NULL;
    if (labels)
        dst->labels = labels;
    if (!images || !labels) {
        dataset_free(src);
        return error_set("CIFAR-10: out of memory for %zu records", n);
    }
    memcpy(dst->images + (size_t)dst->n * CIFAR_IMAGE_BYTES, src->images,
           (size_t)src->n * CIFAR_IMAGE_BYTES);
    memcpy(dst->labels + dst->n, src->labels, (size_t)src->n);
    dst->n = (int)n;
    dataset_free(src);
    return 0;
}

int cifar_present(const char *dir)
{
    char path[4200];
    struct stat sb;
    snprintf(path, sizeof path, "%s/data_batch_1.bin", dir);
    return stat(path, &sb) == 0;
}

static void cifar_normalise(struct dataset *d)
{
    for (int ch = 0; ch < 3; ch++) {
        d->mean[ch] = dataset_cifar_mean[ch];
        d->std[ch] = dataset_cifar_std[ch];
    }
}

int cifar_load(const char *dir, struct dataset *train, struct dataset *test)
{
    memset(train, 0, sizeof *train);
    memset(test, 0, sizeof *test);
    struct stat sb;
    if (stat(dir, &sb) != 0)
        return error_set("%s: missing CIFAR-10 directory: %s", dir, cifar_get_it);
    if (!S_ISDIR(sb.st_mode))
        return error_set("%s: not a directory; pass the directory that holds the CIFAR-10 "
                         "batches (cifar-10-batches-bin)",
                         dir);
    static const char *const files[CIFAR_TRAIN_BATCHES + 1] = {
        "data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin",
        "data_batch_4.bin", "data_batch_5.bin", "test_batch.bin"};
    int per_file = 0;
    for (int i = 0; i <= CIFAR_TRAIN_BATCHES; i++) {
        struct dataset batch;
        if (cifar_load_batch(dir, files[i], &batch))
            goto fail;
        if (i == 0)
            per_file = batch.n;
        /* the training batches are one set cut in equal parts; the test batch is a set of
         * its own, any size (a cut one is not a whole number of records: cifar_parse) */
        if (i < CIFAR_TRAIN_BATCHES && batch.n != per_file) {
            error_set("%s/%s: %d records where %s has %d: %s is truncated (the training "
                      "batches of CIFAR-10 hold the same number of records, 10000)",
                      dir, files[i], batch.n, files[0], per_file,
                      batch.n < per_file ? files[i] : files[0]);
            dataset_free(&batch);
            goto fail;
        }
        if (cifar_append(i < CIFAR_TRAIN_BATCHES ? train : test, &batch))
            goto fail;
    }
    cifar_normalise(train);
    cifar_normalise(test);
    return 0;
fail:
    dataset_free(train);
    dataset_free(test);
    return -1;
}
