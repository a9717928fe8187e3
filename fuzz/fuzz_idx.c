/* fuzz_idx.c — IDX images and labels files, plain or gzip (trainer/data/idx.c).
 *
 * Input: the images file, then "\n--labels--\n", then the labels file (no separator: the
 * labels file is the images file's bytes too).  Both go through idx_load_files from
 * in-memory files; a loaded set must hold what its header says, and every sample must
 * convert (idx_to_float) with its label in [0, num_classes). */
#include "fuzz/fuzz_util.h"

#include "data/idx.h"

#include <stdlib.h>

#define FUZZ_IDX_MAX_PIXELS (1 << 22) /* what one input may make the target convert */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *images, *labels;
    size_t ilen, llen, at = 0;
    fuzz_split(data, size, &at, "\n--labels--\n", &images, &ilen);
    if (!fuzz_split(data, size, &at, "\n--labels--\n", &labels, &llen)) {
        labels = images;
        llen = ilen;
    }
    const char *ipath = fuzz_memfile(0, images, ilen);
    const char *lpath = fuzz_memfile(1, labels, llen);
    struct idx_dataset d;
    if (fuzz_status(idx_load_files(ipath, lpath, &d), "idx_load_files") == 0) {
        FUZZ_CHECK(d.n >= 1 && d.rows >= 1 && d.cols >= 1 && d.images && d.labels,
                   "loaded %d x %d x %d", d.n, d.rows, d.cols);
        /* what the header promised is all there: idx_load_files refuses trailing and
         * missing bytes, so the images file holds exactly 16 + n*rows*cols bytes when
         * plain */
        if (ilen >= 2 && !(images[0] == 0x1f && images[1] == 0x8b))
            FUZZ_CHECK((size_t)d.n * d.rows * d.cols + 16 == ilen,
                       "%d x %d x %d images from a %zu-byte file", d.n, d.rows, d.cols, ilen);
        size_t plane = (size_t)d.rows * d.cols;
        int count = plane * d.n <= FUZZ_IDX_MAX_PIXELS ? d.n : (int)(FUZZ_IDX_MAX_PIXELS / plane);
        if (count > 0) {
            float *x = malloc(plane * (size_t)count * sizeof *x);
            int32_t *y = malloc((size_t)count * sizeof *y);
            FUZZ_CHECK(x && y, "out of memory");
            FUZZ_CHECK(idx_to_float(&d, NULL, count, 0.5f, 0.25f, x, y) == 0, "idx_to_float");
            for (int i = 0; i < count; i++)
                FUZZ_CHECK(y[i] >= 0 && y[i] < d.num_classes, "label %d of %d classes", y[i],
                           d.num_classes);
            free(x);
            free(y);
        }
        idx_free(&d);
    }
    return 0;
}
