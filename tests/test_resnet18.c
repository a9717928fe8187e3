/* test_resnet18.c — the example's ResNet18 on the CPU backend against PyTorch.
 *
 * 1. At width 64 the model's state_dict -- names, order, shapes -- is the PyTorch module's
 *    (tests/golden/resnet18_state_dict.txt) and it has its 11,173,962 parameters.
 * 2. At width 2, from the PyTorch module's initial state_dict (the --init path), one batch
 *    reproduces PyTorch's train-mode logits and loss, every gradient, the BatchNorm running
 *    statistics and counters, and the eval-mode logits after it
 *    (tests/golden/make_golden_resnet18.py wrote them with PyTorch 1.13).
 * 3. Under autocast (fp16 and bf16, emulated by the CPU backend) the same batch gives
 *    logits and gradients near the fp32 ones, finite, through every layer's dtype.
 * 4. The gradient hook sees every trainable parameter once, in reverse parameter order
 *    (what the DDP reducer's buckets assume). */
#include "backend/backend.h"
#include "common/error.h"
#include "io/checkpoint.h"
#include "io/safetensors.h"
#include "nn/model.h"
#include "golden_tensor.h"
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct st_file *expect;

/* 1: names, order, shapes and the parameter count of the full-width model */
static void test_state_dict(struct backend *be)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/tests/golden/resnet18_state_dict.txt", test_source_dir());
    FILE *f = fopen(path, "r");
    CHECK(f != NULL, "open %s", path);
    struct model *m = model_create("resnet18", be, 0);
    CHECK(m != NULL, "resnet18: %s", error_get());
    if (!f || !m) {
        if (f)
            fclose(f);
        if (m)
            m->destroy(m);
        return;
    }
    char line[256];
    int i = 0, bad = 0;
    long long want_params = -1;
    while (fgets(line, sizeof line, f)) {
        char name[160], shape[64];
        if (sscanf(line, "parameters %lld", &want_params) == 1)
            continue;
        if (sscanf(line, "%159s %63s", name, shape) != 2)
            continue;
        if (i >= m->params.count) {
            CHECK(0, "PyTorch has entry %s beyond our %d", name, m->params.count);
            bad++;
            i++;
            continue;
        }
        const struct param *p = m->params.items[i++];
        char ours[64] = "-";
        for (int d = 0, at = 0; d < p->ndim; d++)
            at += snprintf(ours + at, sizeof ours - (size_t)at, "%s%d", d ? "x" : "", p->shape[d]);
        if (strcmp(name, p->name) != 0 || strcmp(shape, ours) != 0) {
            if (bad++ < 5)
                CHECK(0, "state_dict entry %d: PyTorch %s %s, ours %s %s", i - 1, name, shape,
                      p->name, ours);
        }
    }
    fclose(f);
    CHECK(bad == 0, "%d state_dict entries differ from PyTorch's", bad);
    CHECK(i == m->params.count, "PyTorch has %d state_dict entries, ours %d", i,
          m->params.count);
    const size_t numel = params_trainable_numel(&m->params);
    CHECK(want_params == 11173962 && (long long)numel == want_params,
          "parameters: ours %zu, PyTorch %lld (the example's ResNet18 has 11,173,962)", numel,
          want_params);
    printf("resnet18 width 64: %d state_dict entries, %zu parameters\n", m->params.count, numel);
    m->destroy(m);
}

struct order_check {
    int next; /* the trainable index expected next (counting down) */
    int bad;
};

static int order_hook(void *ctx, struct param *p)
{
    struct order_check *o = ctx;
    if (p->index != o->next)
        o->bad++;
    o->next--;
    return 0;
}

/* 2 and 4 */
static void test_golden(struct backend *be)
{
    char init_path[4096], expect_path[4096];
    snprintf(init_path, sizeof init_path, "%s/tests/golden/resnet18_w2_init.safetensors",
             test_source_dir());
    snprintf(expect_path, sizeof expect_path, "%s/tests/golden/resnet18_w2_expect.safetensors",
             test_source_dir());
    expect = st_open(expect_path);
    CHECK(expect != NULL, "open %s: %s", expect_path, error_get());
    if (!expect)
        return;
    struct model *m = resnet18_create(be, 123, 2);
    CHECK(m != NULL, "model: %s", error_get());
    if (!m)
        return;
    CHECK(checkpoint_load_model(init_path, &m->params) == 0, "load init: %s", error_get());

    const struct st_tensor *x = st_find(expect, "input"), *y = st_find(expect, "labels");
    const int n = (int)x->shape[0];
    float *xd = be->alloc(be, x->nbytes);
    int32_t labels[16], *yd = be->alloc(be, (size_t)n * sizeof(int32_t));
    for (int i = 0; i < n; i++)
        labels[i] = (int32_t)((const int64_t *)y->data)[i];
    be->upload(be, xd, x->data, x->nbytes);
    be->upload(be, yd, labels, (size_t)n * sizeof(int32_t));
    float *dlogits = be->alloc(be, (size_t)n * 10 * sizeof(float));

    /* Tolerances: fp32 on both sides, summed in other orders (im2col GEMM vs oneDNN);
     * the errors of a few ulps pass through 17 convolutions and BatchNorm's 1/std over
     * batches as small as 64 values per channel (the last stage), so 2e-4 relative with a
     * 2e-5 floor for forward and gradients (the ConvNet's 1e-4 after 2 layers) */
    const float *logits;
    CHECK(m->forward(m, xd, n, 1, &logits) == 0, "forward: %s", error_get());
    golden_check_tensor(expect, be, "logits", logits, (size_t)n * 10, 2e-5, 2e-4);
    const float loss = be->softmax_xent(be, n, 10, logits, yd, dlogits);
    const float want_loss = *(const float *)st_find(expect, "loss")->data;
    CHECK(fabsf(loss - want_loss) <= 1e-5f * fabsf(want_loss) + 1e-6f, "loss %.8f vs %.8f",
          (double)loss, (double)want_loss);
    struct order_check oc = {.next = m->params.trainable - 1};
    const struct grad_hook hook = {.ready = order_hook, .ctx = &oc};
    CHECK(m->backward(m, dlogits, &hook) == 0, "backward: %s", error_get());
    CHECK(oc.bad == 0 && oc.next == -1,
          "the hook saw %d gradients out of reverse parameter order, %d not at all", oc.bad,
          oc.next + 1);
    char name[256];
    for (int i = 0; i < m->params.count; i++) {
        struct param *p = m->params.items[i];
        if (p->kind == PARAM_TRAINABLE) {
            snprintf(name, sizeof name, "grad.%s", p->name);
            golden_check_tensor(expect, be, name, p->grad, p->numel, 2e-5, 2e-4);
        } else if (p->kind == PARAM_BUFFER) {
            snprintf(name, sizeof name, "running.%s", p->name);
            golden_check_tensor(expect, be, name, p->data, p->numel, 1e-6, 1e-5);
        } else {
            snprintf(name, sizeof name, "running.%s", p->name);
            const struct st_tensor *t = st_find(expect, name);
            CHECK(t && *(const int64_t *)t->data == p->counter, "%s = %lld", name,
                  (long long)p->counter);
        }
    }
    CHECK(m->forward(m, xd, n, 0, &logits) == 0, "eval forward: %s", error_get());
    golden_check_tensor(expect, be, "eval_logits", logits, (size_t)n * 10, 2e-5, 2e-4);

    /* 3: autocast.  A half type keeps 11 (fp16) or 8 (bf16) significant bits at every
     * layer's output.  The logits move by well under a percent (fp16) or a few percent
     * (bf16) of their range.  The gradients pass 18 batch-norm backwards, whose
     * (dy - mean - xhat * mean(dy xhat)) cancels most of dy on batches of 64 values per
     * channel, and ReLU masks that flip on rounded inputs: measured on this batch the
     * whole gradient keeps a cosine of 0.991 (fp16) and 0.920 (bf16) with the fp32 one and
     * its norm within 1% and 7%.  Limits 0.97 / 0.85 and 15%: a missing cast, a wrong type
     * or a misplaced rounding gives garbage (cosine near 0) or non-finite values. */
    float fp32_logits[160];
    CHECK(m->forward(m, xd, n, 1, &logits) == 0, "forward");
    be->download(be, fp32_logits, logits, (size_t)n * 10 * sizeof(float));
    be->softmax_xent(be, n, 10, logits, yd, dlogits);
    CHECK(m->backward(m, dlogits, NULL) == 0, "backward");
    const size_t total = params_trainable_numel(&m->params);
    float *g32 = malloc(total * sizeof *g32), *gh = malloc(total * sizeof *gh);
    for (int i = 0, at = 0; i < m->params.count; i++) {
        const struct param *p = m->params.items[i];
        if (p->kind == PARAM_TRAINABLE) {
            be->download(be, g32 + at, p->grad, p->numel * sizeof(float));
            at += (int)p->numel;
        }
    }
    for (int amp = AMP_F16; amp <= AMP_BF16; amp++) {
        const char *what = amp == AMP_F16 ? "fp16" : "bf16";
        CHECK(m->set_amp(m, (enum amp_dtype)amp) == 0, "%s: %s", what, error_get());
        float half_logits[160];
        CHECK(m->forward(m, xd, n, 1, &logits) == 0, "%s forward: %s", what, error_get());
        be->download(be, half_logits, logits, (size_t)n * 10 * sizeof(float));
        be->softmax_xent(be, n, 10, logits, yd, dlogits);
        CHECK(m->backward(m, dlogits, NULL) == 0, "%s backward: %s", what, error_get());
        for (int i = 0, at = 0; i < m->params.count; i++) {
            const struct param *p = m->params.items[i];
            if (p->kind == PARAM_TRAINABLE) {
                be->download(be, gh + at, p->grad, p->numel * sizeof(float));
                at += (int)p->numel;
            }
        }
        double lmax = 0, ldiff = 0, dot = 0, n32 = 0, nh = 0;
        int finite = 1;
        for (int i = 0; i < n * 10; i++) {
            finite &= isfinite(half_logits[i]);
            lmax = fmax(lmax, fabs(fp32_logits[i]));
            ldiff = fmax(ldiff, fabs(half_logits[i] - fp32_logits[i]));
        }
        for (size_t i = 0; i < total; i++) {
            finite &= isfinite(gh[i]);
            dot += (double)g32[i] * gh[i];
            n32 += (double)g32[i] * g32[i];
            nh += (double)gh[i] * gh[i];
        }
        const double cosine = dot / sqrt(n32 * nh), ratio = sqrt(nh / n32);
        const double ltol = amp == AMP_F16 ? 0.01 : 0.08, ctol = amp == AMP_F16 ? 0.97 : 0.85;
        CHECK(finite && ldiff <= ltol * lmax && cosine >= ctol && fabs(ratio - 1.0) <= 0.15,
              "%s: logits differ by %.3g of their range %.3g (allowed %.2g); gradient cosine "
              "%.4f (at least %.2f), norm ratio %.4f; finite %d",
              what, ldiff, lmax, ltol, cosine, ctol, ratio, finite);
        printf("autocast %s: logits within %.2g of the fp32 range; gradient cosine %.4f, norm "
               "ratio %.4f\n",
               what, ldiff / lmax, cosine, ratio);
    }
    CHECK(m->set_amp(m, AMP_OFF) == 0, "back to fp32");
    free(g32);
    free(gh);
    be->free(be, xd);
    be->free(be, yd);
    be->free(be, dlogits);
    m->destroy(m);
    st_close(expect);
}

int main(void)
{
    struct backend *be = backend_cpu_create(2);
    CHECK(be != NULL, "cpu backend: %s", error_get());
    if (!be)
        return test_finish();
    test_state_dict(be);
    test_golden(be);
    be->destroy(be);
    return test_finish();
}
