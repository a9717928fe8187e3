/* dataset.h — the data a run trains on, whatever its source: IDX files (MNIST,
 * Fashion-MNIST), CIFAR-10 binary batches (cifar.h) or a synthetic set (synthetic.h), as
 * uint8 images (n, c, h, w), labels, and the per-channel normalisation that turns a batch
 * into floats like torchvision's ToTensor() + Normalize(mean, std).
 *
 * Which source (dataset_open, --dataset):
 *   idx        train-/t10k-{images-idx3,labels-idx1}-ubyte[.gz] in the directory
 *   cifar      data_batch_1.bin .. data_batch_5.bin and test_batch.bin in the directory
 *   synthetic  5000 train / 1000 test images of the model's shape, 10 classes, from the seed
 *   auto       what the model's input asks for: IDX for 1-channel images; for 3-channel
 *              ones CIFAR-10 when the directory holds data_batch_1.bin, else synthetic
 *              (with a note saying so).  Nothing is ever downloaded. */
#ifndef DDPPROF_DATASET_H
#define DDPPROF_DATASET_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define DATASET_MAX_CHANNELS 4

enum dataset_kind { DATASET_AUTO = 0, DATASET_IDX = 1, DATASET_CIFAR = 2, DATASET_SYNTHETIC = 3 };

struct dataset {
    int n, c, h, w;
    int num_classes;  /* largest label + 1 (synthetic: 10) */
    uint8_t *images;  /* (n, c, h, w), owned */
    uint8_t *labels;  /* (n), owned */
    float mean[DATASET_MAX_CHANNELS], std[DATASET_MAX_CHANNELS]; /* per channel */
};

/* What to load: the kind, the directory (idx, cifar, auto), the model's input shape, the
 * seed (synthetic) and the single-channel normalisation (--normalize, for IDX and a
 * 1-channel synthetic set; CIFAR-shaped data uses CIFAR-10's statistics). */
struct dataset_request {
    enum dataset_kind kind;
    const char *dir;
    int c, h, w;
    int classes; /* the model's outputs: every label must be below (0: not checked) */
    uint64_t seed;
    float norm_mean, norm_std;
};

/* CIFAR-10's training-set statistics per channel (R, G, B), the usual Normalize values */
extern const float dataset_cifar_mean[3], dataset_cifar_std[3];

/* Load the train and test splits rq asks for into *train and *test (caller frees both
 * with dataset_free); *chosen is the kind loaded (auto resolved).  note (cap bytes) gets
 * one line, without a newline, when the caller should tell the user something (auto fell
 * back to synthetic data; synthetic accuracy is meaningless), else "".  0, or -1 with one
 * error_set line (a missing or bad file, images of another shape than the model's, a label
 * of rq->classes or more, naming its split and record) and both splits left empty. */
int dataset_open(const struct dataset_request *rq, struct dataset *train, struct dataset *test,
                 enum dataset_kind *chosen, char *note, size_t cap);

/* Samples indices[0..count) (indices NULL: 0..count-1) as floats: out_nchw (count, c, h, w)
 * = (pixel / 255 - mean[ch]) / std[ch] in float32 arithmetic (torchvision's ToTensor then
 * Normalize); out_labels (count) may be NULL.  0, or -1 (error_set) for an index outside
 * [0, n) or a std that is not > 0. */
int dataset_to_float(const struct dataset *d, const int64_t *indices, int count,
                     float *out_nchw, int32_t *out_labels);

/* Free what dataset_open (or a loader) allocated and zero *d; safe on a zeroed dataset. */
void dataset_free(struct dataset *d);

/* "auto", "idx", "cifar", "synthetic" */
const char *dataset_kind_name(enum dataset_kind kind);

#ifdef __cplusplus
}
#endif
#endif
