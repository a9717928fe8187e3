/* synthetic.h — a random stand-in data set, like the distributed-training example's
 * custom_data: 5000 training and 1000 test images of a given shape and 10 classes,
 * deterministic from a seed (every rank generates the same set).
 *
 * Each class has a random prototype image; a sample is its class's prototype at half
 * intensity plus uniform noise of the same range, so a model can learn it (its loss falls)
 * but its accuracy says nothing about real data. */
#ifndef DDPPROF_SYNTHETIC_H
#define DDPPROF_SYNTHETIC_H

#include "data/dataset.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SYNTHETIC_TRAIN 5000
#define SYNTHETIC_TEST 1000
#define SYNTHETIC_CLASSES 10

/* Both splits of (c, h, w) images from seed, normalisation left zero (the caller's).  0,
 * or -1 (error_set: a bad shape, out of memory) with both left empty. */
int synthetic_generate(int c, int h, int w, uint64_t seed, struct dataset *train,
                       struct dataset *test);

#ifdef __cplusplus
}
#endif
#endif
