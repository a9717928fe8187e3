/* test_adam.c — torch.optim.Adam (trainer/nn/adam.c, the backends' adam_step slot) against
 * PyTorch, and its state in checkpoints.
 *
 * 1. Golden: tests/golden/make_golden_adam.py (PyTorch 1.13) took two steps on a 1000-
 *    element parameter with gradients from 1e-9 to 10 in magnitude, with the defaults and
 *    with weight decay, other betas and eps; our parameter, exp_avg, exp_avg_sq and step
 *    after step 1 and after step 2 must match.  Bias correction is what makes step 1 move
 *    each parameter by about lr; without it the step would be 3.16 lr (0.1 / sqrt(0.001)),
 *    far outside the tolerance.
 * 2. A checkpoint written after two steps and loaded into a fresh optimizer (--resume)
 *    continues bit for bit: step 3 from both gives the same parameter and moments; the
 *    state is stored as PyTorch's (optimizer.<name>.exp_avg, .exp_avg_sq, .step); resuming
 *    it with SGD is one clear error. */
#include "backend/backend.h"
#include "common/error.h"
#include "io/checkpoint.h"
#include "io/safetensors.h"
#include "nn/optim.h"
#include "nn/scaler.h"
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct st_file *golden;

static const float *tensor(const char *name, size_t n)
{
    const struct st_tensor *t = st_find(golden, name);
    CHECK(t && (size_t)t->numel == n && t->dtype == ST_F32, "golden %s (%zu floats)", name, n);
    return t ? t->data : NULL;
}

/* got against the golden `name`: |got - want| <= atol + rtol |want|, atol = abs_floor +
 * range_frac * max |want| */
static void check_close(const char *name, const float *got, size_t n, double abs_floor,
                        double range_frac, double rtol)
{
    const float *want = tensor(name, n);
    if (!want)
        return;
    double *w = malloc(n * sizeof *w), range = 0.0;
    for (size_t i = 0; i < n; i++) {
        w[i] = want[i];
        range = fmax(range, fabs(w[i]));
    }
    const double atol = abs_floor + range_frac * range;
    const double err = test_max_err(got, w, n, atol, rtol);
    CHECK(err <= 1.0, "%s: worst error %.3g of the tolerance (atol %g rtol %g)", name, err, atol,
          rtol);
    free(w);
}

struct adam_case {
    const char *name;
    double lr, beta1, beta2, eps, wd;
};

/* 1 */
static void test_golden(struct backend *be, const struct adam_case *c)
{
    char name[128];
    snprintf(name, sizeof name, "%s.param0", c->name);
    const struct st_tensor *t0 = st_find(golden, name);
    CHECK(t0 != NULL, "%s missing", name);
    if (!t0)
        return;
    const int n = (int)t0->numel;
    struct param_table t;
    params_init(&t, be);
    struct param *p = params_add(&t, "", "w", PARAM_TRAINABLE, 1, &n);
    CHECK(p != NULL, "param: %s", error_get());
    be->upload(be, p->data, t0->data, (size_t)n * sizeof(float));
    struct adam o;
    CHECK(adam_init(&o, &t, c->lr, c->beta1, c->beta2, c->eps, c->wd) == 0, "init: %s",
          error_get());
    float *host = malloc((size_t)n * sizeof *host);
    for (int k = 1; k <= 2; k++) {
        snprintf(name, sizeof name, "%s.grad%d", c->name, k);
        const float *g = tensor(name, (size_t)n);
        if (!g)
            break;
        be->upload(be, p->grad, g, (size_t)n * sizeof(float));
        CHECK(adam_step(&o) == 0, "step %d: %s", k, error_get());
        CHECK(o.step == k, "step count %lld after %d steps", o.step, k);
        snprintf(name, sizeof name, "%s.step%d.step", c->name, k);
        const float *s = tensor(name, 1);
        CHECK(s && *s == (float)o.step, "%s: PyTorch %g, ours %lld", name, s ? *s : -1.0,
              o.step);
        /* PyTorch's kernels (vectorised, fused multiply-adds) and ours (kernel_math.h, no
         * contraction) round differently in the last bit of each of ~8 operations, and
         * its bias corrections use Python's pow: a few ulp.  Moments: 1e-6 relative, and
         * 1e-6 of the largest one absolute, for weight decay's g + wd * p where it nearly
         * cancels (one rounding there, two here).  The parameter moves by ~lr a step: 1e-6
         * of |p| plus 1e-6 of lr; a missing bias correction is ~2 lr off. */
        be->download(be, host, p->data, (size_t)n * sizeof *host);
        snprintf(name, sizeof name, "%s.step%d.param", c->name, k);
        check_close(name, host, (size_t)n, 1e-6 * c->lr, 0.0, 1e-6);
        be->download(be, host, o.exp_avg[0], (size_t)n * sizeof *host);
        snprintf(name, sizeof name, "%s.step%d.exp_avg", c->name, k);
        check_close(name, host, (size_t)n, 0.0, 1e-6, 1e-6);
        be->download(be, host, o.exp_avg_sq[0], (size_t)n * sizeof *host);
        snprintf(name, sizeof name, "%s.step%d.exp_avg_sq", c->name, k);
        check_close(name, host, (size_t)n, 0.0, 1e-6, 1e-6);
    }
    free(host);
    adam_free(&o);
    params_free(&t);
}

/* a table of two parameters (a 3x5 matrix and a 7-vector) with fixed values */
static void make_params(struct backend *be, struct param_table *t)
{
    params_init(t, be);
    const int shape[2] = {3, 5}, seven = 7;
    struct param *a = params_add(t, "layer", "weight", PARAM_TRAINABLE, 2, shape);
    struct param *b = params_add(t, "layer", "bias", PARAM_TRAINABLE, 1, &seven);
    uint64_t seed = 77;
    float v[15];
    test_fill_uniform(v, 15, -1.0f, 1.0f, &seed);
    be->upload(be, a->data, v, sizeof v);
    test_fill_uniform(v, 7, -1.0f, 1.0f, &seed);
    be->upload(be, b->data, v, 7 * sizeof *v);
}

static void set_grads(struct backend *be, struct param_table *t, int step)
{
    uint64_t seed = 1000 + (uint64_t)step;
    for (int i = 0; i < t->count; i++) {
        struct param *p = t->items[i];
        float g[16];
        test_fill_uniform(g, p->numel, -0.1f, 0.1f, &seed);
        be->upload(be, p->grad, g, p->numel * sizeof *g);
    }
}

/* 2 */
static void test_checkpoint(struct backend *be)
{
    char *dir = test_tmpdir(), *path = test_path(dir, "adam.safetensors");
    struct param_table a, b;
    make_params(be, &a);
    make_params(be, &b);
    const struct optim_config cfg = {.kind = OPTIM_ADAM, .lr = 0.01, .weight_decay = 0.05,
                                     .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8};
    struct optim oa, ob;
    CHECK(optim_init(&oa, &a, &cfg) == 0 && optim_init(&ob, &b, &cfg) == 0, "init: %s",
          error_get());
    for (int k = 1; k <= 2; k++) {
        set_grads(be, &a, k);
        CHECK(optim_step(&oa) == 0, "step %d", k);
    }
    struct grad_scaler sc;
    scaler_init(&sc, 0);
    CHECK(checkpoint_save_optim(path, &a, &oa, &sc, "toy", 1, 2) == 0, "save: %s",
          error_get());
    struct st_file *st = st_open(path);
    CHECK(st && st_find(st, "optimizer.layer.weight.exp_avg") &&
              st_find(st, "optimizer.layer.bias.exp_avg_sq") &&
              st_find(st, "optimizer.layer.bias.step") &&
              strcmp(st_metadata_get(st, "optimizer"), "adam") == 0,
          "the checkpoint lacks PyTorch's Adam state names");
    st_close(st);
    int epoch = 0;
    long long step = 0;
    CHECK(checkpoint_resume(path, &b, &ob, &sc, "toy", &epoch, &step) == 0, "resume: %s",
          error_get());
    CHECK(epoch == 1 && step == 2 && ob.adam.step == 2, "resumed epoch %d step %lld adam %lld",
          epoch, step, ob.adam.step);
    set_grads(be, &a, 3);
    set_grads(be, &b, 3);
    CHECK(optim_step(&oa) == 0 && optim_step(&ob) == 0, "step 3");
    for (int i = 0; i < a.count; i++) {
        const struct param *pa = a.items[i], *pb = b.items[i];
        const size_t bytes = pa->numel * sizeof(float);
        float x[16], y[16], ma[16], mb[16], va[16], vb[16];
        be->download(be, x, pa->data, bytes);
        be->download(be, y, pb->data, bytes);
        be->download(be, ma, oa.adam.exp_avg[i], bytes);
        be->download(be, mb, ob.adam.exp_avg[i], bytes);
        be->download(be, va, oa.adam.exp_avg_sq[i], bytes);
        be->download(be, vb, ob.adam.exp_avg_sq[i], bytes);
        CHECK(memcmp(x, y, bytes) == 0 && memcmp(ma, mb, bytes) == 0 &&
                  memcmp(va, vb, bytes) == 0,
              "%s: the resumed optimizer's step 3 differs from the uninterrupted one", pa->name);
    }
    /* resumed with the other optimizer: refused, on one line */
    struct param_table c;
    make_params(be, &c);
    struct optim oc;
    const struct optim_config sgd = {.kind = OPTIM_SGD, .lr = 0.01};
    CHECK(optim_init(&oc, &c, &sgd) == 0, "sgd init");
    CHECK(checkpoint_resume(path, &c, &oc, &sc, "toy", &epoch, &step) == -1 &&
              strstr(error_get(), "--optimizer adam") && !strchr(error_get(), '\n'),
          "an Adam checkpoint resumed with SGD: '%s'", error_get());
    optim_free(&oa), optim_free(&ob), optim_free(&oc);
    params_free(&a), params_free(&b), params_free(&c);
    free(path);
    free(dir);
}

int main(void)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/tests/golden/adam_expect.safetensors", test_source_dir());
    golden = st_open(path);
    CHECK(golden != NULL, "open %s: %s", path, error_get());
    struct backend *be = backend_cpu_create(2);
    CHECK(be != NULL, "backend: %s", error_get());
    if (!golden || !be)
        return test_finish();
    static const struct adam_case cases[] = {
        {"default", 1e-3, 0.9, 0.999, 1e-8, 0.0},
        {"wd", 0.01, 0.8, 0.99, 1e-6, 0.1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        test_golden(be, &cases[i]);
    test_checkpoint(be);
    be->destroy(be);
    st_close(golden);
    return test_finish();
}
