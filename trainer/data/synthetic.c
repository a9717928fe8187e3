/* synthetic.c — a random CIFAR-like stand-in data set (see synthetic.h). */
#include "data/synthetic.h"

#include "common/error.h"
#include "common/rng.h"

#include <stdlib.h>
#include <string.h>

/* n samples of `image` bytes: label uniform over the classes, pixels the label's prototype
 * halved plus noise in [0, 128) (so 0..255), drawn from r in sample order */
static int synthetic_fill(struct rng *r, const uint8_t *protos, size_t image, int n,
                          struct dataset *d)
{
    d->images = malloc((size_t)n * image);
    d->labels = malloc((size_t)n);
    if (!d->images || !d->labels)
        return error_set("synthetic data: out of memory for %d images of %zu bytes", n, image);
    d->n = n;
    d->num_classes = SYNTHETIC_CLASSES;
    for (int i = 0; i < n; i++) {
        const uint32_t label = rng_next_u32(r) % SYNTHETIC_CLASSES;
        d->labels[i] = (uint8_t)label;
        const uint8_t *proto = protos + label * image;
        uint8_t *img = d->images + (size_t)i * image;
        uint32_t bits = 0;
        for (size_t j = 0; j < image; j++) {
            if (j % 4 == 0)
                bits = rng_next_u32(r);
            img[j] = (uint8_t)(proto[j] / 2 + ((bits >> (8 * (j % 4))) & 127));
        }
    }
    return 0;
}

int synthetic_generate(int c, int h, int w, uint64_t seed, struct dataset *train,
                       struct dataset *test)
{
    memset(train, 0, sizeof *train);
    memset(test, 0, sizeof *test);
    if (c < 1 || c > DATASET_MAX_CHANNELS || h < 1 || w < 1 || h > 4096 || w > 4096)
        return error_set("synthetic data: images of %dx%dx%d: need 1..%d channels and sides "
                         "1..4096",
                         c, h, w, DATASET_MAX_CHANNELS);
    const size_t image = (size_t)c * h * w;
    uint8_t *protos = malloc(SYNTHETIC_CLASSES * image);
    if (!protos)
        return error_set("synthetic data: out of memory");
    struct rng r;
    rng_seed(&r, seed);
    for (size_t j = 0; j < SYNTHETIC_CLASSES * image; j++)
        protos[j] = (uint8_t)(rng_next_u32(&r) & 255);
    int rc = synthetic_fill(&r, protos, image, SYNTHETIC_TRAIN, train) ||
             synthetic_fill(&r, protos, image, SYNTHETIC_TEST, test);
    free(protos);
    struct dataset *both[2] = {train, test};
    for (int k = 0; k < 2; k++) {
        both[k]->c = c;
        both[k]->h = h;
        both[k]->w = w;
    }
    if (rc) {
        dataset_free(train);
        dataset_free(test);
        return -1;
    }
    return 0;
}
