/* train.c — one rank's training run (see train.h; the other train_*.c files, listed in
 * train_rank.h, hold its parts).
 *
 * The loop is the seeds': for each epoch, train on this rank's share of the data
 * (train_step.c), then evaluate on the test set (train_eval.c), save the checkpoint, and
 * print on rank 0 the lines of the model's seed: the DDP tutorial's for the ConvNet, the
 * distributed-training example's (`train | epoch: N | loss: X`,
 * `val | epoch: N | loss: X | accuracy: Y`) for ResNet18. */
#include "train_rank.h"

#include "comm/comm.h"
#include "comm/flight.h"
#include "comm/store.h"
#include "common/clock.h"
#include "common/error.h"
#include "ddp/reducer.h"
#include "launch/dist_env.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void train_opts_default(struct train_opts *o)
{
    *o = (struct train_opts){
        .mode = TRAIN_BASELINE,
        .model = model_specs()[0]->name, /* the registry's first */
        .model_opts = MODEL_OPTS_DEFAULT,
        .seed = 0,
        .data = {.dataset = DATASET_AUTO, .dir = "/usr/share/datasets/fashion-mnist",
                 .batch_size = 32, .shuffle = 1, .norm_mean = 0.0f, .norm_std = 1.0f},
        .optim = {.kind = OPTIM_SGD, .lr = 1e-4f},
        .amp = {.dtype = AMP_OFF, .scale_init = 65536.0f, .scale_growth = 2.0f,
                .scale_backoff = 0.5f, .scale_interval = 2000},
        .ddp = {.bucket_cap_mb = 25.0, .sync_bn = 1},
        .dev = {.timeout_ms = 300000},
        .run = {.epochs = 3, .trace = PROBE_KERNELS},
    };
}

/* seconds on the probes' clock (CLOCK_MONOTONIC) */
static double now_s(void) { return 1e-9 * (double)clock_now_ns(); }

void rank_say(const struct rank *r, const char *fmt, ...)
{
    if (r->rank != 0 || r->o->run.quiet)
        return;
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    fflush(stdout);
}

/* the data set of o's --dataset and --data, for a model of input (c, h, w) and classes */
static struct dataset_request data_request(const struct train_opts *o, int c, int h, int w,
                                           int classes)
{
    return (struct dataset_request){.kind = (enum dataset_kind)o->data.dataset,
                                    .dir = o->data.dir, .c = c, .h = h, .w = w,
                                    .classes = classes, .seed = o->seed,
                                    .norm_mean = o->data.norm_mean,
                                    .norm_std = o->data.norm_std};
}

int train_check_inputs(const struct train_opts *o)
{
    int c, h, w, classes;
    if (model_input(o->model, &c, &h, &w, &classes))
        return -1;
    const struct dataset_request rq = data_request(o, c, h, w, classes);
    if (rq.kind == DATASET_SYNTHETIC)
        return 0; /* generated: nothing to check */
    struct dataset train, test;
    enum dataset_kind kind;
    char note[512];
    if (dataset_open(&rq, &train, &test, &kind, note, sizeof note))
        return -1;
    dataset_free(&train);
    dataset_free(&test);
    return 0;
}

/* the model, the data set its input asks for (dataset.h; every rank loads the same), the
 * optimizer and the GradScaler, autocast */
static int rank_setup_model(struct rank *r)
{
    const struct train_opts *o = r->o;
    if (!(r->m = model_create_opts(o->model, r->dev.be, o->seed, &o->model_opts)))
        return -1;
    const struct dataset_request rq =
        data_request(o, r->m->in_c, r->m->in_h, r->m->in_w, r->m->classes);
    char note[512];
    if (dataset_open(&rq, &r->train, &r->test, &r->dataset, note, sizeof note))
        return -1;
    if (note[0])
        rank_say(r, "ddpprof: %s\n", note);
    if (o->data.limit > 0 && o->data.limit < r->train.n)
        r->train.n = (int)o->data.limit;
    if (o->data.test_limit > 0 && o->data.test_limit < r->test.n)
        r->test.n = (int)o->data.test_limit;
    if (o->run.init_path && checkpoint_load_model(o->run.init_path, &r->m->params))
        return error_wrap("--init");
    r->lr = o->optim.lr_scale_by_world ? o->optim.lr * (float)r->world : o->optim.lr;
    const struct optim_config oc = {.kind = (enum optim_kind)o->optim.kind, .lr = r->lr,
                                    .weight_decay = o->optim.weight_decay,
                                    .momentum = o->optim.momentum, .beta1 = ADAM_BETA1,
                                    .beta2 = ADAM_BETA2, .eps = ADAM_EPS};
    if (optim_init(&r->opt, &r->m->params, &oc))
        return -1;
    scaler_init(&r->scaler, o->amp.dtype == AMP_F16);
    if (r->scaler.enabled) {
        r->scaler.scale = o->amp.scale_init;
        r->scaler.growth_factor = o->amp.scale_growth;
        r->scaler.backoff_factor = o->amp.scale_backoff;
        r->scaler.growth_interval = o->amp.scale_interval;
    }
    if (o->amp.dtype != AMP_OFF && r->m->set_amp(r->m, o->amp.dtype))
        return -1;
    return 0;
}

/* one batch's buffers, for the larger of the two data sets' samplers */
static int rank_setup_batch(struct rank *r)
{
    struct backend *be = r->dev.be;
    struct rank_batch *b = &r->batch;
    const int n = r->o->data.batch_size;
    const size_t img = (size_t)r->m->in_c * r->m->in_h * r->m->in_w;
    const int most = r->train.n > r->test.n ? r->train.n : r->test.n;
    b->x_host = malloc((size_t)n * img * sizeof(float));
    b->y_host = malloc((size_t)n * sizeof(int32_t));
    b->indices = malloc(((size_t)most + 1) * sizeof(int64_t));
    b->x_dev = be->alloc(be, (size_t)n * img * sizeof(float));
    b->y_dev = be->alloc(be, (size_t)n * sizeof(int32_t));
    b->dlogits = be->alloc(be, (size_t)n * r->m->classes * sizeof(float));
    b->scalars = be->alloc(be, 3 * sizeof(float));
    if (!b->x_host || !b->y_host || !b->indices || !b->x_dev || !b->y_dev || !b->dlogits ||
        !b->scalars)
        return error_set("out of memory for a batch of %d", n);
    return 0;
}

int rank_open_probe(struct rank *r)
{
    const struct train_opts *o = r->o;
    struct probe_opts po;
    probe_opts_default(&po);
    po.rank = r->rank;
    po.world_size = r->world;
    po.run_dir = o->run.out_dir ? o->run.out_dir : ".";
    po.mode = o->run.out_dir ? o->run.trace : PROBE_OFF;
    device_probe_opts(&r->dev, &po);
    po.quiet = r->rank != 0;
    if (!(r->probe = probe_create(&po)))
        return error_wrap("probes");
    /* with more compute threads the backend's workers would count as the others */
    r->cpu_share = po.mode != PROBE_OFF && r->dev.gpu < 0 && o->dev.threads == 1;
    return 0;
}

static int rank_setup(struct rank *r, const struct dist_env *env)
{
    const struct train_opts *o = r->o;
    /* an elastic restart's directory holds the earlier attempts (attempt-K, moved aside by
     * the node agent): only the first attempt checks --out is free */
    if (r->rank == 0 && o->run.out_dir &&
        ((r->restart_count == 0 && runlog_prepare(o->run.out_dir, o->run.overwrite)) ||
         runlog_open(&r->log, o->run.out_dir)))
        return -1;
    if (device_open(&r->dev, &o->dev, r->rank, r->local_rank, r->local_world) ||
        rank_setup_model(r))
        return -1;
    /* in DDP rank 0 alone reads --resume, once the comm is up (rank_resume_ddp) */
    if (o->run.resume_path && o->mode != TRAIN_DDP && rank_resume_local(r))
        return -1;
    if (rank_setup_batch(r))
        return -1;
    if (o->run.out_dir && mkdir_parents(o->run.out_dir)) /* ranks > 0 write their trace here */
        return -1;
    if (o->mode == TRAIN_DDP && rank_session_open(r, env))
        return -1;
    if (r->resume.resumed && rank_resume_check(r))
        return -1;
    if (!r->probe && rank_open_probe(r)) /* DDP opened it before its first collective */
        return -1;
    rank_session_observe(r);
    rank_meta_write(r);
    if (r->store && rank_meta_clocks(r))
        return -1;
    return 0;
}

/* failed: this rank is giving up (its error is set), so it does not wait for the others at
 * the store.  Returns -1 (error_set) when the run failed or the trace lost rows or meta.csv
 * or metrics.csv could not be completed on disk: a run whose files are incomplete is a
 * failed run.  The message says every loss, the trace's rows with the run files' (a full
 * disk stops a run at a metrics row, and the rows still buffered for the trace are lost with
 * it), after the failure itself unless the run files' loss tells it. */
static int rank_teardown(struct rank *r, int failed)
{
    struct backend *be = r->dev.be;
    char why[1024] = "", lost[1024] = ""; /* the failure's and the trace's errors, kept past
                                             the teardown below */
    if (failed)
        snprintf(why, sizeof why, "%s", error_get());
    if (be) {
        be->free(be, r->batch.x_dev);
        be->free(be, r->batch.y_dev);
        be->free(be, r->batch.dlogits);
        be->free(be, r->batch.scalars);
    }
    if (r->probe && probe_destroy(r->probe))
        snprintf(lost, sizeof lost, "%s", error_get());
    r->probe = NULL;
    reducer_destroy(r->red);
    optim_free(&r->opt);
    if (r->m)
        r->m->destroy(r->m);
    if (r->coll)
        r->coll->destroy(r->coll);
    device_comm_close(&r->dev);
    if (r->store && failed)
        store_abort(r->store);
    else if (r->store)
        store_destroy(r->store);
    device_close(&r->dev);
    dataset_free(&r->train);
    dataset_free(&r->test);
    free(r->batch.x_host);
    free(r->batch.y_host);
    free(r->batch.indices);
    char files[1024] = "";
    if (runlog_close(&r->log))
        snprintf(files, sizeof files, "%s", error_get());
    /* a failed write of the run's own files ("writing DIR/metrics.csv: ...", "trace
     * DIR/rank0.trace.csv: write failed ...") is what the counts below say: said once */
    const char *dir = r->o->run.out_dir;
    if (dir && (files[0] || lost[0])) {
        char writing[4200], trace[4200];
        snprintf(writing, sizeof writing, "writing %s/", dir);
        snprintf(trace, sizeof trace, "trace %s/", dir);
        if (strncmp(why, writing, strlen(writing)) == 0 || strncmp(why, trace, strlen(trace)) == 0)
            why[0] = '\0';
    }
    if (!why[0] && !files[0] && !lost[0])
        return failed ? -1 : 0;
    return error_set("%s%s%s%s%s", why, why[0] && (files[0] || lost[0]) ? "; " : "", files,
                     files[0] && lost[0] ? "; " : "", lost);
}

/* rank 0's checkpoints after epoch (0-based): checkpoint.safetensors every epoch for
 * --resume; with --save-every-epoch also epoch_N, as the example's epoch_N.pth */
static int rank_save_epoch(struct rank *r, int epoch)
{
    const struct train_opts *o = r->o;
    if (r->rank != 0 || !o->run.out_dir)
        return 0;
    const struct checkpoint_run cr = {.world_size = r->world,
                                      .batch_size = o->data.batch_size, .position = 0};
    char path[4200];
    snprintf(path, sizeof path, "%s/checkpoint.safetensors", o->run.out_dir);
    if (checkpoint_save_run(path, &r->m->params, &r->opt, &r->scaler, o->model, epoch + 1,
                            r->step, &cr))
        return -1;
    if (!o->run.save_every_epoch)
        return 0;
    snprintf(path, sizeof path, "%s/epoch_%d.safetensors", o->run.out_dir, epoch + 1);
    return checkpoint_save_run(path, &r->m->params, &r->opt, &r->scaler, o->model, epoch + 1,
                               r->step, &cr);
}

/* One epoch (0-based): train, evaluate, save, print and record; *accuracy and *val_loss
 * are the evaluation's */
static int rank_epoch(struct rank *r, int epoch, double *accuracy, double *val_loss)
{
    const struct train_opts *o = r->o;
    /* the printed lines of the model's seed: the distributed-training example's for its
     * ResNet18, the DDP tutorial's otherwise */
    const struct model_spec *spec = model_spec(o->model);
    const int example_lines = spec && spec->example_lines;
    if (!example_lines)
        rank_say(r, "begin training of epoch %d/%d\n", epoch + 1, o->run.epochs);
    double t0 = now_s(), loss = 0.0;
    int rc = rank_train_epoch(r, epoch, &loss);
    double dt = now_s() - t0;
    if (rc)
        return -1;
    if (example_lines)
        rank_say(r, "train | epoch: %d | loss: %.4f\n", epoch + 1, loss);
    else
        rank_say(r, "epoch %d: mean loss %.4f, %.2f s, %.0f images/s\nbegin testing\n",
                 epoch + 1, loss, dt, (double)r->train.n / dt);
    probe_set_step(r->probe, 0, epoch + 1);
    probe_push(r->probe, PROBE_EVAL);
    rc = rank_evaluate(r, accuracy, val_loss);
    probe_pop(r->probe);
    /* every epoch's rows on disk (TRACE.md); rows lost so far (a full disk) fail the run
     * now, before the epoch's checkpoint takes the last free space */
    probe_flush(r->probe);
    struct probe_stats ps;
    probe_stats(r->probe, &ps);
    if (rc || ps.rows_lost) /* probe_flush's error: the trace's, set last */
        return -1;
    if (rank_save_epoch(r, epoch))
        return -1;
    if (r->rank == 0 && o->amp.dtype != AMP_OFF && !isfinite(*val_loss))
        rank_warn_val_loss(r, epoch, *val_loss);
    if (example_lines)
        rank_say(r, "val | epoch: %d | loss: %.4f | accuracy: %.4f\n\n", epoch + 1, *val_loss,
                 *accuracy);
    else
        rank_say(r, "Accuracy is %.2f%%\n", 100.0 * *accuracy);
    rank_meta_epoch(r, epoch, dt, loss, *accuracy, *val_loss);
    return 0;
}

int train_run(const struct train_opts *o_in, const struct dist_env *env)
{
    double t_start = now_s();
    struct host_usage usage0;
    runlog_host_usage(&usage0);
    struct train_opts o = *o_in;
    struct rank r = {.o = &o, .world = 1, .local_world = 1};
    if (env) {
        r.rank = env->rank;
        r.world = env->world;
        r.local_rank = env->local_rank;
        r.local_world = env->local_world > 0 ? env->local_world : env->world;
        r.node_rank = env->node_rank >= 0 ? env->node_rank : r.rank / r.local_world;
        r.restart_count = env->restart_count;
    }
    if (o.dev.threads <= 0) {
        long cores = sysconf(_SC_NPROCESSORS_ONLN);
        o.dev.threads = cores / r.local_world > 0 ? (int)(cores / r.local_world) : 1;
    }
    r.tty = isatty(STDERR_FILENO);
    r.usage0 = usage0;
    flight_set_dir(o.run.out_dir); /* a failed collective leaves rankN.flight.csv by the trace */
    rank_faults_read(&r);
    int rc = rank_setup(&r, env);
    double accuracy = 0.0, val_loss = 0.0;
    for (int epoch = r.resume.start_epoch; rc == 0 && epoch < o.run.epochs; epoch++)
        rc = rank_epoch(&r, epoch, &accuracy, &val_loss);
    double elapsed = now_s() - t_start;
    if (rc == 0)
        rc = rank_meta_usage(&r, elapsed);
    if (rc == 0) {
        rank_meta_end(&r, accuracy, elapsed);
        rank_say(&r, "\ntime elapsed: %.2f seconds\n", elapsed);
    }
    if (rank_teardown(&r, rc != 0) && rc == 0)
        rc = -1;
    return rc;
}
