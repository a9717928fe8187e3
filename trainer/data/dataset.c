/* dataset.c — one data set type over IDX, CIFAR-10 and synthetic sources (see dataset.h). */
#include "data/dataset.h"

#include "common/error.h"
#include "data/cifar.h"
#include "data/idx.h"
#include "data/synthetic.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const float dataset_cifar_mean[3] = {0.4914f, 0.4822f, 0.4465f};
const float dataset_cifar_std[3] = {0.2470f, 0.2435f, 0.2616f};

const char *dataset_kind_name(enum dataset_kind kind)
{
    static const char *const names[] = {"auto", "idx", "cifar", "synthetic"};
    return kind >= DATASET_AUTO && kind <= DATASET_SYNTHETIC ? names[kind] : "?";
}

void dataset_free(struct dataset *d)
{
    free(d->images);
    free(d->labels);
    memset(d, 0, sizeof *d);
}

/* an IDX split taken over as a 1-channel data set */
static void dataset_from_idx(struct idx_dataset *x, struct dataset *d)
{
    *d = (struct dataset){.n = x->n, .c = 1, .h = x->rows, .w = x->cols,
                          .num_classes = x->num_classes, .images = x->images,
                          .labels = x->labels};
    memset(x, 0, sizeof *x);
}

static int dataset_load_idx(const char *dir, struct dataset *train, struct dataset *test)
{
    struct idx_dataset a = {0}, b = {0};
    if (idx_load_split(dir, 1, &a) || idx_load_split(dir, 0, &b)) {
        idx_free(&a);
        idx_free(&b);
        return -1;
    }
    dataset_from_idx(&a, train);
    dataset_from_idx(&b, test);
    return 0;
}

/* the normalisation of a set that is not CIFAR-10's own: CIFAR's statistics for
 * CIFAR-shaped images, else the single pair of --normalize on every channel */
static void dataset_normalise(struct dataset *d, const struct dataset_request *rq)
{
    const int cifar_like = d->c == 3 && d->h == 32 && d->w == 32;
    for (int ch = 0; ch < d->c && ch < DATASET_MAX_CHANNELS; ch++) {
        d->mean[ch] = cifar_like ? dataset_cifar_mean[ch] : rq->norm_mean;
        d->std[ch] = cifar_like ? dataset_cifar_std[ch] : rq->norm_std;
    }
}

/* every label of d below classes; 0, or -1 naming the split, the record and the label */
static int dataset_check_labels(const struct dataset *d, int classes, const char *dir,
                                enum dataset_kind kind, const char *split)
{
    for (int i = 0; i < d->n; i++)
        if (d->labels[i] >= classes)
            return error_set("%s: %s %s set: record %d (counting from 0) has label %u, but the "
                             "model has %d classes (labels 0..%d); the data set does not fit "
                             "the model, or its labels file is damaged",
                             dir, dataset_kind_name(kind), split, i, (unsigned)d->labels[i],
                             classes, classes - 1);
    return 0;
}

int dataset_open(const struct dataset_request *rq, struct dataset *train, struct dataset *test,
                 enum dataset_kind *chosen, char *note, size_t cap)
{
    memset(train, 0, sizeof *train);
    memset(test, 0, sizeof *test);
    if (cap)
        note[0] = '\0';
    enum dataset_kind kind = rq->kind;
    const char *why = "";
    if (kind == DATASET_AUTO) {
        if (rq->c == 1)
            kind = DATASET_IDX;
        else if (cifar_present(rq->dir))
            kind = DATASET_CIFAR;
        else {
            kind = DATASET_SYNTHETIC;
            why = "no CIFAR-10 batches (data_batch_1.bin) in --data, so ";
        }
    }
    int rc;
    switch (kind) {
    case DATASET_IDX:
        rc = dataset_load_idx(rq->dir, train, test);
        break;
    case DATASET_CIFAR:
        rc = cifar_load(rq->dir, train, test);
        break;
    default:
        rc = synthetic_generate(rq->c, rq->h, rq->w, rq->seed, train, test);
        if (rc == 0 && cap)
            snprintf(note, cap,
                     "%s--dataset synthetic: %d training and %d test images (%dx%dx%d, %d "
                     "classes) generated from seed %llu: a stand-in, accuracy on it is "
                     "meaningless",
                     why, train->n, test->n, rq->c, rq->h, rq->w, train->num_classes,
                     (unsigned long long)rq->seed);
        break;
    }
    if (rc)
        return -1;
    if (kind != DATASET_CIFAR) {
        dataset_normalise(train, rq);
        dataset_normalise(test, rq);
    }
    if (train->c != rq->c || train->h != rq->h || train->w != rq->w ||
        test->c != train->c || test->h != train->h || test->w != train->w) {
        error_set("%s: %s images are %dx%dx%d but the model takes %dx%dx%d (pick the data set "
                  "of the model: --dataset, --data)",
                  rq->dir, dataset_kind_name(kind), train->c, train->h, train->w, rq->c, rq->h,
                  rq->w);
        dataset_free(train);
        dataset_free(test);
        return -1;
    }
    if (rq->classes > 0 && (dataset_check_labels(train, rq->classes, rq->dir, kind, "training") ||
                            dataset_check_labels(test, rq->classes, rq->dir, kind, "test"))) {
        dataset_free(train);
        dataset_free(test);
        return -1;
    }
    *chosen = kind;
    return 0;
}

int dataset_to_float(const struct dataset *d, const int64_t *indices, int count,
                     float *out_nchw, int32_t *out_labels)
{
    /* every pixel value maps through ToTensor's x / 255 then Normalize's (x - mean) / std,
     * both in float32: one table per channel */
    float table[DATASET_MAX_CHANNELS][256];
    for (int ch = 0; ch < d->c; ch++) {
        if (!(d->std[ch] > 0.0f))
            return error_set("dataset: std %g for channel %d; it must be > 0 (1 for no "
                             "normalisation)",
                             (double)d->std[ch], ch);
        for (int v = 0; v < 256; v++)
            table[ch][v] = ((float)v / 255.0f - d->mean[ch]) / d->std[ch];
    }
    const size_t plane = (size_t)d->h * d->w, image = plane * d->c;
    for (int k = 0; k < count; k++) {
        const int64_t i = indices ? indices[k] : k;
        if (i < 0 || i >= d->n)
            return error_set("dataset: sample index %lld at position %d is outside the data "
                             "set of %d samples",
                             (long long)i, k, d->n);
        const uint8_t *src = d->images + (size_t)i * image;
        float *dst = out_nchw + (size_t)k * image;
        for (int ch = 0; ch < d->c; ch++)
            for (size_t p = 0; p < plane; p++)
                dst[ch * plane + p] = table[ch][src[ch * plane + p]];
        if (out_labels)
            out_labels[k] = d->labels[i];
    }
    return 0;
}
