/* fuzz_cifar.c — CIFAR-10 binary batches (trainer/data/cifar.c, cifar_parse on the bytes).
 *
 * A parsed batch must hold len / 3073 records of 3x32x32 images with labels 0..9, and
 * every record must convert (dataset_to_float). */
#include "fuzz/fuzz_util.h"

#include "data/cifar.h"
#include "data/dataset.h"

#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct dataset d;
    if (fuzz_status(cifar_parse(data, size, "fuzz.bin", &d), "cifar_parse") == 0) {
        FUZZ_CHECK(d.n >= 1 && (size_t)d.n * CIFAR_RECORD_BYTES == size && d.c == 3 &&
                       d.h == 32 && d.w == 32 && d.num_classes == 10,
                   "%d records of %dx%dx%d from %zu bytes", d.n, d.c, d.h, d.w, size);
        for (int ch = 0; ch < 3; ch++)
            d.std[ch] = 1.0f;
        float *x = malloc((size_t)d.n * CIFAR_IMAGE_BYTES * sizeof *x);
        int32_t *y = malloc((size_t)d.n * sizeof *y);
        FUZZ_CHECK(x && y, "out of memory");
        FUZZ_CHECK(dataset_to_float(&d, NULL, d.n, x, y) == 0, "dataset_to_float");
        for (int i = 0; i < d.n; i++)
            FUZZ_CHECK(y[i] >= 0 && y[i] < 10 && y[i] == data[(size_t)i * CIFAR_RECORD_BYTES],
                       "record %d: label %d", i, y[i]);
        free(x);
        free(y);
        dataset_free(&d);
    }
    return 0;
}
