/* golden_tensor.h — a device tensor against the tensor PyTorch wrote for it
 * (tests/golden/make_golden_*.py), for the CPU golden tests (test_convnet_golden,
 * test_resnet18): present, of the model's size, and within atol + rtol*|want| everywhere
 * (testutil.h test_max_err).  Failures are CHECKs naming the tensor. */
#ifndef DDPPROF_TESTS_GOLDEN_TENSOR_H
#define DDPPROF_TESTS_GOLDEN_TENSOR_H

#include "backend/backend.h"
#include "io/safetensors.h"
#include "testutil.h"

#include <stdlib.h>

/* the n floats at dev (on be) against the golden tensor `name` of expect */
static inline void golden_check_tensor(const struct st_file *expect, struct backend *be,
                                       const char *name, const float *dev, size_t n,
                                       double atol, double rtol)
{
    const struct st_tensor *t = st_find(expect, name);
    CHECK(t != NULL, "golden tensor %s missing", name);
    if (!t)
        return;
    CHECK((size_t)t->numel == n, "%s: %lld elements, model has %zu", name, (long long)t->numel,
          n);
    if ((size_t)t->numel != n)
        return;
    float *got = malloc(n * sizeof *got);
    double *want = malloc(n * sizeof *want);
    be->download(be, got, dev, n * sizeof *got);
    const float *g = t->data;
    for (size_t i = 0; i < n; i++)
        want[i] = g[i];
    double err = test_max_err(got, want, n, atol, rtol);
    CHECK(err <= 1.0, "%s: max error %.3g of tolerance (atol %g, rtol %g)", name, err, atol,
          rtol);
    free(got);
    free(want);
}

#endif
