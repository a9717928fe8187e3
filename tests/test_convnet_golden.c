/* test_convnet_golden.c — the ConvNet on the CPU backend against PyTorch.
 *
 * tests/golden/make_golden_convnet.py (PyTorch 1.13) wrote the initial state_dict and,
 * for one random batch, the train-mode logits and loss, every gradient, the BatchNorm
 * running statistics, the parameters after two SGD steps (momentum, weight decay) and
 * the eval-mode logits.  Loading the same state_dict here (the --init path) must
 * reproduce all of them. */
#include "backend/backend.h"
#include "io/checkpoint.h"
#include "nn/model.h"
#include "io/safetensors.h"
#include "nn/sgd.h"
#include "golden_tensor.h"
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct st_file *expect;

int main(void)
{
    char init_path[4096], expect_path[4096];
    snprintf(init_path, sizeof init_path, "%s/tests/golden/convnet_init.safetensors",
             test_source_dir());
    snprintf(expect_path, sizeof expect_path, "%s/tests/golden/convnet_expect.safetensors",
             test_source_dir());
    expect = st_open(expect_path);
    CHECK(expect != NULL, "open %s", expect_path);
    if (!expect)
        return test_finish();

    struct backend *be = backend_cpu_create(1);
    struct model *m = model_create("convnet", be, 123);
    CHECK(m != NULL, "model");
    CHECK(checkpoint_load_model(init_path, &m->params) == 0, "load init");

    const struct st_tensor *x = st_find(expect, "input"), *y = st_find(expect, "labels");
    int n = (int)x->shape[0];
    float *xd = be->alloc(be, (size_t)x->nbytes);
    int32_t labels[64], *yd = be->alloc(be, (size_t)n * sizeof(int32_t));
    for (int i = 0; i < n; i++)
        labels[i] = (int32_t)((const int64_t *)y->data)[i];
    be->upload(be, xd, x->data, x->nbytes);
    be->upload(be, yd, labels, (size_t)n * sizeof(int32_t));
    float *dlogits = be->alloc(be, (size_t)n * 10 * sizeof(float));

    /* Tolerances: PyTorch and we both compute in fp32 but sum in different orders
     * (im2col GEMM vs MKL-DNN/THNN); errors of a few ulps grow through 2 conv layers and
     * BatchNorm's 1/std, so 1e-4 relative with a 1e-5 absolute floor covers forward and
     * gradients, and 2e-4/1e-5 the parameters after two steps. */
    const float *logits;
    CHECK(m->forward(m, xd, n, 1, &logits) == 0, "forward");
    golden_check_tensor(expect, be, "logits", logits, (size_t)n * 10, 1e-5, 1e-4);
    float loss = be->softmax_xent(be, n, 10, logits, yd, dlogits);
    float want_loss = *(const float *)st_find(expect, "loss")->data;
    CHECK(fabsf(loss - want_loss) <= 1e-5f * fabsf(want_loss) + 1e-6f, "loss %.8f vs %.8f",
          (double)loss, (double)want_loss);
    CHECK(m->backward(m, dlogits, NULL) == 0, "backward");
    char name[256];
    for (int i = 0; i < m->params.count; i++) {
        struct param *p = m->params.items[i];
        if (p->kind == PARAM_TRAINABLE) {
            snprintf(name, sizeof name, "grad.%s", p->name);
            golden_check_tensor(expect, be, name, p->grad, p->numel, 1e-5, 1e-4);
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

    struct sgd opt;
    CHECK(sgd_init(&opt, &m->params, 0.05f, 0.9f, 0.0f, 1e-3f, 0) == 0, "sgd");
    CHECK(sgd_step(&opt) == 0, "step 1");
    CHECK(m->forward(m, xd, n, 1, &logits) == 0, "forward 2");
    be->softmax_xent(be, n, 10, logits, yd, dlogits);
    CHECK(m->backward(m, dlogits, NULL) == 0, "backward 2");
    CHECK(sgd_step(&opt) == 0, "step 2");
    for (int i = 0; i < m->params.count; i++) {
        struct param *p = m->params.items[i];
        if (p->kind != PARAM_TRAINABLE)
            continue;
        snprintf(name, sizeof name, "step2.%s", p->name);
        golden_check_tensor(expect, be, name, p->data, p->numel, 1e-5, 2e-4);
    }
    CHECK(m->forward(m, xd, n, 0, &logits) == 0, "eval forward");
    golden_check_tensor(expect, be, "eval_logits", logits, (size_t)n * 10, 1e-4, 2e-4);

    sgd_free(&opt);
    be->free(be, xd);
    be->free(be, yd);
    be->free(be, dlogits);
    m->destroy(m);
    be->destroy(be);
    st_close(expect);
    return test_finish();
}
