/* train_step.c — one epoch's steps on one rank (train_rank.h).  Each step: load the
 * batch, forward, softmax cross-entropy, backward with the DDP reducer's hook, wait for the
 * buckets, unscale and check for inf/nan, SGD or Adam step; then the step's metrics.csv
 * row, a checkpoint every --checkpoint-every steps, and rank 0's progress (the launcher's
 * bar: drawn here on a terminal, else sent to the launcher, which draws it for the job). */
#include "train_rank.h"
#include "train_layers.h"

#include "comm/comm.h"
#include "common/clock.h"
#include "common/error.h"
#include "data/sampler.h"
#include "ddp/reducer.h"
#include "launch/launcher.h"
#include "launch/worker_link.h"

#include <math.h>
#include <signal.h>
#include <time.h>
#include <stdio.h>
#include <unistd.h>

/* Load n = count samples at indices into the device batch buffers. */
int rank_load_batch(struct rank *r, const struct dataset *d, const int64_t *idx, int n)
{
    if (dataset_to_float(d, idx, n, r->batch.x_host, r->batch.y_host))
        return -1;
    size_t img = (size_t)d->c * d->h * d->w;
    struct backend *be = r->dev.be;
    be->upload(be, r->batch.x_dev, r->batch.x_host, (size_t)n * img * sizeof(float));
    be->upload(be, r->batch.y_dev, r->batch.y_host, (size_t)n * sizeof(int32_t));
    return 0;
}

/* The CPU time of the process's threads other than the training thread in a range (the
 * comm's threads, gloo's loop, the trace's flusher, the store server on rank 0): the
 * process's CPU clock's advance less the training thread's own.  Only on ranks of one
 * compute thread (rank->cpu_share), where the backend runs no workers of its own and
 * OpenBLAS is held to one thread (backend_cpu.c).  Three clock_gettime calls a mark, four
 * marks a step (probes/TRACE.md, kind cpu). */
struct cpu_mark {
    int64_t mono_ns, proc_ns, self_ns;
};

static int64_t cpu_clock_ns(clockid_t id)
{
    struct timespec ts;
    if (clock_gettime(id, &ts))
        return 0;
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void cpu_mark_take(const struct rank *r, struct cpu_mark *m)
{
    if (!r->cpu_share)
        return;
    m->self_ns = cpu_clock_ns(CLOCK_THREAD_CPUTIME_ID);
    m->proc_ns = cpu_clock_ns(CLOCK_PROCESS_CPUTIME_ID);
    m->mono_ns = clock_now_ns();
}

/* the row of phase ph: the others' CPU ns between marks a and b (taken in that order) */
static void cpu_row(struct rank *r, enum probe_phase ph, const struct step_metrics *sm,
                    const struct cpu_mark *a, const struct cpu_mark *b)
{
    if (!r->cpu_share)
        return;
    const int64_t others = (b->proc_ns - a->proc_ns) - (b->self_ns - a->self_ns);
    const struct trace_row row = {.step = sm->step, .epoch = sm->epoch, .phase = ph,
                                  .bucket = -1, .clock = TRACE_CLOCK_HOST,
                                  .start_ns = a->mono_ns, .end_ns = b->mono_ns,
                                  .bytes = others > 0 ? (uint64_t)others : 0,
                                  .name = "cpu.others", .kind = TRACE_KIND_CPU,
                                  .stream = TRACE_LANE_COMM};
    probe_row(r->probe, &row);
}

/* One optimisation step on n samples: forward, loss, backward (scaled by the GradScaler,
 * buckets all-reduced as gradients become ready), unscale and inf check, SGD step unless
 * an inf/nan was found.  Fills the step's loss (global mean), scale and found_inf. */
static int rank_step(struct rank *r, int n, struct step_metrics *sm)
{
    struct model *m = r->m;
    struct backend *be = r->dev.be;
    const float *logits;
    rank_layers_start(r); /* --trace full: each layer a range (train_layers.h) */
    probe_push_sized(r->probe, PROBE_FORWARD, (uint64_t)n); /* NVTX: the batch's images */
    if (m->forward(m, r->batch.x_dev, n, 1, &logits))
        return -1;
    /* the loss stays on the device until it is logged, after the step's collectives:
     * the host runs ahead of the GPU through backward, as PyTorch's loss.item() at the end */
    be->softmax_xent_dev(be, n, m->classes, logits, r->batch.y_dev, r->batch.dlogits,
                         r->batch.scalars);
    if (be->status(be)) /* errors seen so far (no wait) */
        return -1;
    probe_pop(r->probe);
    probe_push(r->probe, PROBE_BACKWARD);
    struct cpu_mark bwd0 = {0}, bwd1 = {0};
    cpu_mark_take(r, &bwd0);
    size_t nd = (size_t)n * m->classes;
    sm->loss_scale = r->scaler.scale;
    if (r->scaler.enabled) /* scaler.scale(loss).backward() */
        be->scale(be, nd, r->scaler.scale, r->batch.dlogits, r->batch.dlogits);
    if (r->step + 1 == r->faults.inf_step) {
        float inf = 1.0f / 0.0f;
        be->upload(be, r->batch.dlogits, &inf, sizeof inf);
    }
    /* under autocast the model's backward casts dlogits back to the half type (the
     * backward of its logits' cast to fp32 for the loss), where an overflow becomes inf */
    struct grad_hook hook = {0};
    if (r->red)
        hook = reducer_hook(r->red);
    if (m->backward(m, r->batch.dlogits, r->red ? &hook : NULL))
        return -1;
    rank_layers_stop(r);
    cpu_mark_take(r, &bwd1);
    cpu_row(r, PROBE_BACKWARD, sm, &bwd0, &bwd1);
    probe_pop(r->probe);
    if (r->red && reducer_finish(r->red)) /* the exposed wait: between backward and optimizer */
        return -1;
    probe_push(r->probe, PROBE_OPTIMIZER);
    if (r->red) { /* the loss for metrics.csv: the global mean, on the device */
        be->scale(be, 1, 1.0f / (float)r->world, r->batch.scalars, r->batch.scalars);
        /* stream-ordered; settle bounds the read below by the comm's timeout (it also
         * covers the buckets and SyncBatchNorm's collectives, joined without a host wait) */
        if (comm_allreduce_join(r->coll, r->batch.scalars, 1, COMM_F32) ||
            comm_settle(r->coll))
            return error_wrap("all-reducing the loss");
    }
    float l = NAN;
    be->download(be, &l, r->batch.scalars, sizeof l); /* the step's loss read (a host sync) */
    if (be->status(be)) /* the download synced: covers the step so far */
        return -1;
    sm->loss = l;
    /* fp32 and bf16 have no GradScaler to skip such a step: the run has diverged */
    if (!r->scaler.enabled && !isfinite(l))
        return error_set("the loss is %s%s: training has diverged (%s has no GradScaler to "
                         "skip the step); lower --lr, or check the data",
                         isnan(l) ? "nan" : l > 0 ? "inf" : "-inf",
                         r->world > 1 ? " (the mean over the ranks)" : "",
                         r->o->amp.dtype == AMP_BF16 ? "bf16" : "fp32");
    if (scaler_unscale(&r->scaler, &m->params, r->coll, r->batch.scalars, &sm->found_inf))
        return -1;
    if (!sm->found_inf && optim_step(&r->opt))
        return -1;
    scaler_update(&r->scaler, sm->found_inf);
    r->epoch_steps++;
    r->epoch_skipped += sm->found_inf != 0;
    probe_pop(r->probe);
    return 0;
}

/* rank 0's progress: the job's images done in this epoch (launcher.h's bar) */
static void rank_progress(const struct rank *r, int epoch, int64_t done, int64_t total,
                          double loss)
{
    if (r->rank != 0 || r->o->run.quiet || total <= 0)
        return;
    const struct worker_progress p = {.epoch = epoch + 1, .epochs = r->o->run.epochs,
                                      .done = (long long)done * r->world,
                                      .total = (long long)total * r->world, .loss = loss};
    if (r->tty) /* not under ddpprof's launcher (its workers' stderr is a pipe) */
        launcher_draw_bar(STDERR_FILENO, &p);
    else
        worker_link_say("progress %d %d %lld %lld %.4f", p.epoch, p.epochs, p.done, p.total,
                        p.loss);
}

int rank_train_epoch(struct rank *r, int epoch, double *mean_loss)
{
    const struct train_opts *o = r->o;
    struct sampler s;
    if (sampler_init(&s, r->train.n, r->world, r->rank, o->data.shuffle, (int64_t)o->seed, 0))
        return -1;
    sampler_set_epoch(&s, epoch);
    r->epoch_steps = r->epoch_skipped = 0;
    if (sampler_indices(&s, r->batch.indices))
        return -1;
    int64_t count = sampler_num_samples(&s);
    if (o->data.drop_last) /* DataLoader(drop_last=True): no incomplete last batch */
        count -= count % o->data.batch_size;
    double sum = 0.0;
    int batches = 0;
    const int64_t first = rank_resume_first(r, epoch, count);
    if (first < 0)
        return -1;
    for (int64_t at = first; at < count; at += o->data.batch_size) {
        int n = (int)(count - at < o->data.batch_size ? count - at : o->data.batch_size);
        struct step_metrics sm = {.step = r->step + 1, .epoch = epoch + 1, .lr = r->lr,
                                  .images = (int64_t)n * r->world};
        if (r->faults.kill_after_ms && !r->faults.first_step_ns)
            r->faults.first_step_ns = clock_now_ns();
        if (r->step + 1 == r->faults.kill_step ||
            (r->faults.kill_after_ms &&
             clock_now_ns() - r->faults.first_step_ns >= r->faults.kill_after_ms * 1000000LL)) {
            fflush(NULL);
            raise(SIGKILL);
        }
        if (r->step + 1 == r->faults.skip_step) {
            r->step++;
            continue;
        }
        probe_set_step(r->probe, r->step + 1, epoch + 1);
        probe_push(r->probe, PROBE_STEP);
        struct cpu_mark step0 = {0}, step1 = {0};
        cpu_mark_take(r, &step0);
        if (r->faults.delay_ms > 0) { /* a planted straggler (train_faults.c) */
            const struct timespec ts = {.tv_sec = r->faults.delay_ms / 1000,
                                        .tv_nsec = r->faults.delay_ms % 1000 * 1000000L};
            nanosleep(&ts, NULL);
        }
        probe_push(r->probe, PROBE_DATA);
        int rc = rank_load_batch(r, &r->train, r->batch.indices + at, n);
        probe_pop(r->probe);
        if (rc || rank_step(r, n, &sm))
            return error_wrap("epoch %d step %lld", epoch + 1, r->step + 1);
        cpu_mark_take(r, &step1);
        cpu_row(r, PROBE_STEP, &sm, &step0, &step1);
        probe_pop(r->probe);
        r->step++;
        sum += sm.loss;
        batches++;
        if (runlog_metrics(&r->log, &sm))
            return -1;
        /* --checkpoint-every: not on an epoch's last step, whose epoch checkpoint follows */
        if (o->run.checkpoint_every && r->step % o->run.checkpoint_every == 0 &&
            at + n < count && r->rank == 0 && o->run.out_dir) {
            char path[4200];
            snprintf(path, sizeof path, "%s/checkpoint.safetensors", o->run.out_dir);
            const struct checkpoint_run cr = {.world_size = r->world,
                                              .batch_size = o->data.batch_size,
                                              .position = at + n};
            if (checkpoint_save_run(path, &r->m->params, &r->opt, &r->scaler, o->model, epoch,
                                    r->step, &cr))
                return -1;
        }
        if (at + n == count || batches % 20 == 0)
            rank_progress(r, epoch, at + n, count, sm.loss);
    }
    *mean_loss = batches ? sum / batches : 0.0;
    return 0;
}
