/* idx.h — IDX data sets (MNIST, Fashion-MNIST): load an images/labels pair, plain or gzip,
 * and turn a batch of samples into normalised float NCHW like torchvision's
 * ToTensor() + Normalize(mean, std).
 *
 * Format: big-endian 32-bit magic 0x00000803 then n, rows, cols and n*rows*cols uint8
 * pixels (images); magic 0x00000801 then n and n uint8 labels (labels).  Files are read with
 * zlib's gzread, so "x" and "x.gz" load the same way. */
#ifndef DDPPROF_IDX_H
#define DDPPROF_IDX_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define IDX_MAGIC_IMAGES 0x00000803u
#define IDX_MAGIC_LABELS 0x00000801u

struct idx_dataset {
    int n, rows, cols;
    int num_classes;  /* largest label + 1 */
    uint8_t *images;  /* (n, rows, cols), row-major */
    uint8_t *labels;  /* (n) */
};

/* Load an images file and its labels file (each plain or gzip).  On success fills *out
 * (the caller owns it and calls idx_free) and returns 0.  On any bad input returns -1 with
 * one error_set line naming the file, what is wrong (missing, wrong magic with expected and
 * found in hex, truncated with expected and got bytes, corrupt gzip, absurd dimensions,
 * trailing bytes, image/label count mismatch) and what to do; *out is then left empty. */
int idx_load_files(const char *images_path, const char *labels_path, struct idx_dataset *out);

/* Load the train (train != 0) or test split from dir: train-images-idx3-ubyte[.gz] and
 * train-labels-idx1-ubyte[.gz], or the same with t10k-.  The plain file is preferred when
 * both exist.  Errors as idx_load_files, plus a missing directory or file. */
int idx_load_split(const char *dir, int train, struct idx_dataset *out);

/* Free what idx_load_* allocated and zero *d; safe on a zeroed or already freed dataset. */
void idx_free(struct idx_dataset *d);

/* Samples indices[0..count) (indices NULL: 0..count-1) as floats: out_nchw is
 * (count, 1, rows, cols) = (pixel / 255 - mean) / std in float32 arithmetic, exactly
 * torchvision's ToTensor() then Normalize((mean,), (std,)); mean 0, std 1 means no
 * normalisation.  out_labels (count) may be NULL.  Both caller-owned.  Returns 0, or -1
 * with error_set if an index is outside [0, n) or std is not > 0 (nothing useful written). */
int idx_to_float(const struct idx_dataset *d, const int64_t *indices, int count, float mean,
                 float std, float *out_nchw, int32_t *out_labels);

#ifdef __cplusplus
}
#endif
#endif
