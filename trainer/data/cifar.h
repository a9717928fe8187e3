/* cifar.h — CIFAR-10 binary batches ("CIFAR-10 binary version", cifar-10-binary.tar.gz).
 *
 * A batch file is records of 3073 bytes: one label byte (0..9), then 3072 pixel bytes, the
 * 32x32 red plane, then green, then blue (CHW, row-major).  The training split is
 * data_batch_1.bin .. data_batch_5.bin in order, the test split test_batch.bin; every file
 * of the set holds the same number of records (10000 in the real one). */
#ifndef DDPPROF_CIFAR_H
#define DDPPROF_CIFAR_H

#include "data/dataset.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CIFAR_IMAGE_BYTES 3072
#define CIFAR_RECORD_BYTES (1 + CIFAR_IMAGE_BYTES)
#define CIFAR_TRAIN_BATCHES 5

/* Parse one batch held in buf (len bytes; name is what messages call it) into *out: n
 * records of 3x32x32 images, 10 classes, normalisation left zero (the caller's).  0, or -1
 * with one error_set line and *out empty: an empty buffer, a length that is not a whole
 * number of records, a label above 9.  No I/O: a fuzzer can call it on any bytes. */
int cifar_parse(const uint8_t *buf, size_t len, const char *name, struct dataset *out);

/* Load both splits from dir, normalised with CIFAR-10's statistics.  0, or -1 with one
 * error_set line (a missing directory or batch, a file cifar_parse rejects, a batch with
 * another number of records than data_batch_1.bin: one of them is truncated; the test
 * batch may hold any whole number of records) and both left empty. */
int cifar_load(const char *dir, struct dataset *train, struct dataset *test);

/* 1 when dir holds data_batch_1.bin (a CIFAR-10 directory, for auto-detection) */
int cifar_present(const char *dir);

#ifdef __cplusplus
}
#endif
#endif
