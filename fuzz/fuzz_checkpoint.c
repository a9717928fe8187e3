/* fuzz_checkpoint.c — checkpoints given to --resume and state_dicts given to --init
 * (trainer/io/checkpoint.c over the safetensors reader), for a tiny model: a 2x3 weight
 * and a bias (trainable), a running mean (buffer) and a batch counter, on the CPU backend.
 *
 * The bytes are resumed with SGD and with Adam, each with the GradScaler on and off, and
 * loaded as --init weights.  Whatever is accepted must be a state training can go on
 * from: epoch in [0, CHECKPOINT_MAX_EPOCHS], step >= 0, a finite scale > 0, growth >= 1,
 * backoff in (0, 1], interval >= 1, tracker in [0, interval), Adam's step whole and >= 0,
 * every weight and optimizer value finite and the batch count >= 0. */
#include "fuzz/fuzz_util.h"

#include "backend/backend.h"
#include "io/checkpoint.h"
#include "nn/optim.h"
#include "nn/params.h"
#include "nn/scaler.h"

#include <math.h>
#include <stdlib.h>

static struct backend *fuzz_be;

static void fuzz_tiny_model(struct param_table *t)
{
    if (!fuzz_be)
        FUZZ_CHECK((fuzz_be = backend_cpu_create(1)), "backend_cpu_create");
    params_init(t, fuzz_be);
    const int w[2] = {2, 3}, three = 3;
    FUZZ_CHECK(params_add(t, "layer", "weight", PARAM_TRAINABLE, 2, w) &&
                   params_add(t, "layer", "bias", PARAM_TRAINABLE, 1, &three) &&
                   params_add(t, "bn", "running_mean", PARAM_BUFFER, 1, &three) &&
                   params_add(t, "bn", "num_batches_tracked", PARAM_COUNTER, 0, NULL),
               "params_add");
}

/* every value of the device tensor p (numel floats) finite */
static void fuzz_check_tensor(const char *what, const float *dev, size_t numel)
{
    float host[8];
    FUZZ_CHECK(numel <= 8, "%s: %zu elements", what, numel);
    fuzz_be->download(fuzz_be, host, dev, numel * sizeof *host);
    for (size_t i = 0; i < numel; i++)
        FUZZ_CHECK(isfinite(host[i]), "%s[%zu] = %g accepted", what, i, (double)host[i]);
}

static void fuzz_check_params(const struct param_table *t)
{
    for (int i = 0; i < t->count; i++) {
        const struct param *p = t->items[i];
        if (p->kind == PARAM_COUNTER)
            FUZZ_CHECK(p->counter >= 0, "%s = %lld accepted", p->name, (long long)p->counter);
        else
            fuzz_check_tensor(p->name, p->data, p->numel);
    }
}

static void fuzz_resume(const char *path, enum optim_kind kind, int amp)
{
    struct param_table t;
    fuzz_tiny_model(&t);
    struct optim o;
    const struct optim_config cfg = {.kind = kind, .lr = 0.1, .momentum = 0.9, .beta1 = 0.9,
                                     .beta2 = 0.999, .eps = 1e-8};
    FUZZ_CHECK(optim_init(&o, &t, &cfg) == 0, "optim_init");
    struct grad_scaler sc;
    scaler_init(&sc, amp);
    int epoch = -7;
    long long step = -7;
    if (fuzz_status(checkpoint_resume(path, &t, &o, &sc, "tiny", &epoch, &step),
                    "checkpoint_resume") == 0) {
        FUZZ_CHECK(epoch >= 0 && epoch <= CHECKPOINT_MAX_EPOCHS, "epoch %d accepted", epoch);
        FUZZ_CHECK(step >= 0 && step <= CHECKPOINT_MAX_STEPS, "step %lld accepted", step);
        FUZZ_CHECK(sc.enabled == amp && isfinite(sc.scale) && sc.scale > 0.0f &&
                       sc.growth_factor >= 1.0f && sc.backoff_factor > 0.0f &&
                       sc.backoff_factor <= 1.0f && sc.growth_interval >= 1 &&
                       sc.growth_tracker >= 0 && sc.growth_tracker < sc.growth_interval,
                   "scaler accepted: scale %g growth %g backoff %g interval %d tracker %d",
                   (double)sc.scale, (double)sc.growth_factor, (double)sc.backoff_factor,
                   sc.growth_interval, sc.growth_tracker);
        fuzz_check_params(&t);
        for (int i = 0; i < t.count; i++) {
            const struct param *p = t.items[i];
            if (p->kind != PARAM_TRAINABLE)
                continue;
            if (kind == OPTIM_SGD && o.sgd.started[p->index])
                fuzz_check_tensor("momentum_buffer", o.sgd.buf[p->index], p->numel);
            if (kind == OPTIM_ADAM && o.adam.step > 0) {
                fuzz_check_tensor("exp_avg", o.adam.exp_avg[p->index], p->numel);
                fuzz_check_tensor("exp_avg_sq", o.adam.exp_avg_sq[p->index], p->numel);
            }
        }
        FUZZ_CHECK(kind != OPTIM_ADAM || o.adam.step >= 0, "Adam step %lld", o.adam.step);
    }
    optim_free(&o);
    params_free(&t);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_memfile(0, data, size);
    for (int kind = OPTIM_SGD; kind <= OPTIM_ADAM; kind++)
        for (int amp = 0; amp <= 1; amp++)
            fuzz_resume(path, (enum optim_kind)kind, amp);
    struct param_table t;
    fuzz_tiny_model(&t);
    if (fuzz_status(checkpoint_load_model(path, &t), "checkpoint_load_model") == 0)
        fuzz_check_params(&t);
    params_free(&t);
    return 0;
}
