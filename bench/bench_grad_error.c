/* bench_grad_error.c — the whole-step gradient error of each CPU convolution path: one
 * train-mode ResNet18 step from bench/grad_error.py's init and batch, every trainable
 * parameter's gradient against the float64 one that script computed with PyTorch,
 *
 *     global relative error = ||g - g64|| / ||g64||   over all parameters together.
 *
 * Train-mode BatchNorm divides by each batch's standard deviation, so the convolutions'
 * rounding is amplified through the 20 layers; this is what the per-op NMSE
 * (tests/test_conv_nmse.c) adds up to.  A measurement: it prints and asserts nothing.
 * scripts/grad-error runs both.
 *
 * usage: bench_grad_error INIT EXPECT [THREADS]    (default 2 threads) */
#include "backend/backend.h"
#include "backend/backend_cpu.h"
#include "common/error.h"
#include "io/checkpoint.h"
#include "io/safetensors.h"
#include "nn/model.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* ||g - g64|| / ||g64|| for one step on be, or -1 (message on stderr) */
static double step_error(struct backend *be, const char *init, const struct st_file *expect)
{
    struct model *m = resnet18_create(be, 0, 64);
    if (!m || checkpoint_load_model(init, &m->params)) {
        fprintf(stderr, "bench_grad_error: %s\n", error_get());
        if (m)
            m->destroy(m);
        return -1;
    }
    const struct st_tensor *x = st_find(expect, "input"), *y = st_find(expect, "labels");
    if (!x || !y) {
        fprintf(stderr, "bench_grad_error: no input or labels in the expect file\n");
        m->destroy(m);
        return -1;
    }
    const int n = (int)x->shape[0];
    float *xd = be->alloc(be, x->nbytes), *dlogits = be->alloc(be, (size_t)n * 10 * 4);
    int32_t *labels = malloc((size_t)n * sizeof *labels), *yd = be->alloc(be, (size_t)n * 4);
    float *g = NULL;
    double num = 0, den = 0, err = -1;
    if (!xd || !dlogits || !labels || !yd)
        goto fail;
    for (int i = 0; i < n; i++)
        labels[i] = (int32_t)((const int64_t *)y->data)[i];
    be->upload(be, xd, x->data, x->nbytes);
    be->upload(be, yd, labels, (size_t)n * sizeof *labels);
    const float *logits;
    if (m->forward(m, xd, n, 1, &logits))
        goto fail;
    be->softmax_xent(be, n, 10, logits, yd, dlogits);
    if (m->backward(m, dlogits, NULL))
        goto fail;
    for (int i = 0; i < m->params.count; i++) {
        const struct param *p = m->params.items[i];
        if (p->kind != PARAM_TRAINABLE)
            continue;
        char name[256];
        snprintf(name, sizeof name, "grad.%s", p->name);
        const struct st_tensor *t = st_find(expect, name);
        float *more = realloc(g, p->numel * sizeof *g);
        if (!t || t->nbytes != p->numel * sizeof(float) || !more) {
            fprintf(stderr, "bench_grad_error: %s missing or of another size\n", name);
            g = more ? more : g;
            goto out;
        }
        g = more;
        be->download(be, g, p->grad, p->numel * sizeof *g);
        const float *want = t->data;
        for (size_t k = 0; k < p->numel; k++) {
            const double d = (double)g[k] - want[k];
            num += d * d;
            den += (double)want[k] * want[k];
        }
    }
    err = sqrt(num / den);
    goto out;
fail:
    fprintf(stderr, "bench_grad_error: %s\n", error_get());
out:
    be->free(be, xd);
    be->free(be, dlogits);
    be->free(be, yd);
    free(labels);
    free(g);
    m->destroy(m);
    return err;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: %s INIT EXPECT [THREADS]\n", argv[0]);
        return 2;
    }
    const int threads = argc > 3 ? atoi(argv[3]) : 2;
    struct st_file *expect = st_open(argv[2]);
    if (!expect) {
        fprintf(stderr, "bench_grad_error: %s\n", error_get());
        return 1;
    }
    static const struct {
        const char *name;
        enum cpu_path path;
        enum conv_algo algo;
    } paths[] = {{"reference", CPU_PATH_REFERENCE, CONV_ALGO_AUTO},
                 {"direct", CPU_PATH_FAST, CONV_ALGO_DIRECT},
                 {"auto", CPU_PATH_FAST, CONV_ALGO_AUTO},
                 {"winograd", CPU_PATH_FAST, CONV_ALGO_WINOGRAD}};
    int rc = 0;
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
        struct backend *be = backend_cpu_create_conv(threads, 0, paths[i].path, paths[i].algo);
        if (!be) {
            fprintf(stderr, "bench_grad_error: %s\n", error_get());
            rc = 1;
            continue;
        }
        const double err = step_error(be, argv[1], expect);
        if (err < 0)
            rc = 1;
        else
            printf("ddpprof %-9s global relative error %.3e  (%s)\n", paths[i].name, err,
                   backend_cpu_describe(be));
        be->destroy(be);
    }
    st_close(expect);
    return rc;
}
