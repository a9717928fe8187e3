/* train_meta.c — meta.csv of one rank's run (train_rank.h), written by rank 0 and by a node
 * leader with a run directory of its own (runlog_meta is a no-op elsewhere): the run's
 * description once set up, every rank's clock offset and host, each epoch's figures, and at
 * the end the host's usage (what tells a busy host) and the totals.  The keys and their
 * order are the report's input; every key is a row of probes/run_format.h. */
#include "train_rank.h"
#include "train_layers.h"

#include "cli.h"
#include "comm/store.h"
#include "common/error.h"
#include "ddp/reducer.h"

#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

void rank_meta_write(struct rank *r)
{
    const struct train_opts *o = r->o;
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    struct runlog *l = &r->log;
    runlog_meta(l, RUN_META_model, "%s", o->model);
    cli_write_meta(o, l); /* the model's options, as cli.c's table records them */
    runlog_meta(l, RUN_META_mode, "%s", o->mode == TRAIN_DDP ? "ddp" : "baseline");
    device_write_meta(&r->dev, l);
    runlog_meta(l, RUN_META_world_size, "%d", r->world);
    runlog_meta(l, RUN_META_threads_per_rank, "%d", o->dev.threads);
    runlog_meta(l, RUN_META_dataset, "%s", dataset_kind_name(r->dataset));
    runlog_meta(l, RUN_META_data, "%s", r->dataset == DATASET_SYNTHETIC ? "synthetic" : o->data.dir);
    runlog_meta(l, RUN_META_train_samples, "%d", r->train.n);
    runlog_meta(l, RUN_META_test_samples, "%d", r->test.n);
    runlog_meta(l, RUN_META_batch_size, "%d", o->data.batch_size);
    runlog_meta(l, RUN_META_global_batch_size, "%d", o->data.batch_size * r->world);
    runlog_meta(l, RUN_META_epochs, "%d", o->run.epochs);
    runlog_meta(l, RUN_META_drop_last, "%d", o->data.drop_last);
    runlog_meta(l, RUN_META_optimizer, "%s", optim_name((enum optim_kind)o->optim.kind));
    runlog_meta(l, RUN_META_lr, "%g", (double)r->lr);
    runlog_meta(l, RUN_META_lr_scale_by_world, "%d", o->optim.lr_scale_by_world);
    runlog_meta(l, RUN_META_momentum, "%g", (double)o->optim.momentum);
    runlog_meta(l, RUN_META_weight_decay, "%g", (double)o->optim.weight_decay);
    runlog_meta(l, RUN_META_seed, "%llu", (unsigned long long)o->seed);
    runlog_meta(l, RUN_META_shuffle, "%d", o->data.shuffle);
    char norm[160] = "";
    for (int ch = 0, at = 0; ch < r->train.c && at < (int)sizeof norm; ch++)
        at += snprintf(norm + at, sizeof norm - (size_t)at, "%s%g,%g", ch ? ";" : "",
                       (double)r->train.mean[ch], (double)r->train.std[ch]);
    runlog_meta(l, RUN_META_normalize, "%s", norm);
    static const char *const amp_names[] = {"off", "fp16", "bf16"};
    runlog_meta(l, RUN_META_amp, "%s", amp_names[o->amp.dtype]);
    runlog_meta(l, RUN_META_resume, "%s", o->run.resume_path ? o->run.resume_path : "");
    runlog_meta(l, RUN_META_trace, "%s", probe_mode_name(o->run.trace));
    const char *note = probe_gpu_note(r->probe);
    if (note && *note)
        runlog_meta(l, RUN_META_cupti, "%s", note);
    if (r->red)
        for (int b = 0; b < reducer_bucket_count(r->red); b++) {
            int np;
            size_t bytes;
            reducer_bucket_info(r->red, b, &np, &bytes);
            runlog_meta_at(l, RUN_META_bucket_params, b, "%d", np);
            runlog_meta_at(l, RUN_META_bucket_bytes, b, "%zu", bytes);
        }
    if (o->mode == TRAIN_DDP) {
        runlog_meta(l, RUN_META_sync_bn, "%d", o->ddp.sync_bn);
        runlog_meta(l, RUN_META_bucket_cap_mb, "%g", o->ddp.bucket_cap_mb);
        runlog_meta(l, RUN_META_buckets, "%d", r->red ? reducer_bucket_count(r->red) : 0);
    }
    runlog_meta(l, RUN_META_init, "%s", o->run.init_path ? o->run.init_path : "");
    runlog_meta(l, RUN_META_ddpprof_version, "%s", DDPPROF_VERSION);
    runlog_meta(l, RUN_META_git_revision, "%s", DDPPROF_GIT_REV);
    runlog_meta(l, RUN_META_openblas, "%s", openblas_get_config());
    runlog_meta(l, RUN_META_hostname, "%s", host);
    runlog_meta(l, RUN_META_start_time, "%lld", (long long)time(NULL));
    runlog_meta(l, RUN_META_host_cores, "%ld", sysconf(_SC_NPROCESSORS_ONLN));
    runlog_meta(l, RUN_META_host_load_start, "%.2f", r->usage0.load1);
    rank_layers_meta(r); /* --trace full: layers, params, measured peak */
    if (o->mode != TRAIN_DDP)
        return;
    runlog_meta(l, RUN_META_node_rank, "%d", r->node_rank);
    runlog_meta(l, RUN_META_local_world_size, "%d", r->local_world);
    runlog_meta(l, RUN_META_restarts, "%d", r->restart_count);
    /* why the earlier attempts failed, as the node agent saw it (one line each) */
    const char *causes = getenv("DDPPROF_RESTART_CAUSES");
    for (int i = 1; causes && *causes && i <= r->restart_count; i++) {
        size_t n = strcspn(causes, "\n");
        runlog_meta_at(l, RUN_META_restart_cause, i, "%.*s", (int)n, causes);
        causes += n + (causes[n] == '\n');
    }
    if (r->resume.resumed) {
        runlog_meta(l, RUN_META_resumed_epoch, "%d", r->resume.start_epoch);
        runlog_meta(l, RUN_META_resumed_step, "%lld", r->step);
    }
    if (o->run.checkpoint_every)
        runlog_meta(l, RUN_META_checkpoint_every, "%ld", o->run.checkpoint_every);
}

/* A rank that writes meta.csv (rank 0, a node leader): clock_offset_ns.rankN,
 * clock_rtt_ns.rankN and host.rankN for every rank */
int rank_meta_clocks(struct rank *r)
{
    for (int k = 0; k < r->world && r->log.meta; k++) {
        char key[64], val[300] = "";
        size_t len = 0;
        long long off = 0, rtt = 0;
        snprintf(key, sizeof key, "clock/%d", k);
        if (store_get(r->store, key, val, sizeof val - 1, &len))
            return -1;
        val[len < sizeof val ? len : sizeof val - 1] = '\0';
        if (sscanf(val, "%lld %lld", &off, &rtt) != 2)
            return error_set("rank %d published a malformed clock offset '%s'", k, val);
        runlog_meta_at(&r->log, RUN_META_rank_clock_offset_ns, k, "%lld", off);
        runlog_meta_at(&r->log, RUN_META_rank_clock_rtt_ns, k, "%lld", rtt);
        snprintf(key, sizeof key, "host/%d", k);
        if (store_get(r->store, key, val, sizeof val - 1, &len))
            return -1;
        val[len < sizeof val ? len : sizeof val - 1] = '\0';
        runlog_meta_at(&r->log, RUN_META_rank_host, k, "%s", val);
    }
    return 0;
}

/* What tells a busy host (report/FORMULAS.md "Figures measured under load"): every rank's
 * CPU and wall seconds since it started (published through the store), and on rank 0 the
 * host's load average at the end and the CPU time all of its processes used and the
 * hypervisor stole meanwhile; ranks_cpu_s sums the ranks on rank 0's host, so the report
 * can tell the CPU time of other programs. */
int rank_meta_usage(struct rank *r, double wall_s)
{
    struct host_usage u;
    runlog_host_usage(&u);
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    char key[64], val[400];
    double cpu = u.cpu_s - r->usage0.cpu_s, local_cpu = 0.0;
    if (r->rank != 0) {
        snprintf(val, sizeof val, "%.3f %.3f %s", cpu, wall_s, host);
        snprintf(key, sizeof key, "usage/%d", r->rank);
        return store_set(r->store, key, val, strlen(val) + 1);
    }
    for (int k = 0; k < r->world; k++) {
        char where[256] = "";
        double c = cpu, w = wall_s;
        if (k > 0) {
            size_t len = 0;
            snprintf(key, sizeof key, "usage/%d", k);
            if (store_get(r->store, key, val, sizeof val - 1, &len))
                return -1;
            val[len] = '\0';
            if (sscanf(val, "%lf %lf %255s", &c, &w, where) < 2)
                return error_set("rank %d published a malformed usage '%.60s'", k, val);
        }
        runlog_meta_at(&r->log, RUN_META_rank_cpu_s, k, "%.3f", c);
        runlog_meta_at(&r->log, RUN_META_rank_wall_s, k, "%.3f", w);
        if (k == 0 || strcmp(where, host) == 0)
            local_cpu += c;
    }
    runlog_meta(&r->log, RUN_META_ranks_cpu_s, "%.3f", local_cpu);
    runlog_meta(&r->log, RUN_META_host_load_end, "%.2f", u.load1);
    if (u.have_stat && r->usage0.have_stat) {
        runlog_meta(&r->log, RUN_META_host_busy_s, "%.3f", u.busy_s - r->usage0.busy_s);
        runlog_meta(&r->log, RUN_META_host_steal_s, "%.3f", u.steal_s - r->usage0.steal_s);
    }
    return 0;
}

void rank_meta_epoch(struct rank *r, int epoch, double train_s, double train_loss,
                     double accuracy, double val_loss)
{
    runlog_meta_at(&r->log, RUN_META_epoch_train_s, epoch + 1, "%.3f", train_s);
    if (r->rank == 0) { /* the reduced tallies are rank 0's; a node leader's are its own */
        runlog_meta_at(&r->log, RUN_META_epoch_accuracy, epoch + 1, "%.6f", accuracy);
        runlog_meta_at(&r->log, RUN_META_epoch_val_loss, epoch + 1, "%.6f", val_loss);
    }
    runlog_meta_at(&r->log, RUN_META_epoch_train_loss, epoch + 1, "%.6f", train_loss);
}

void rank_meta_end(struct rank *r, double accuracy, double wall_s)
{
    if (r->rank == 0)
        runlog_meta(&r->log, RUN_META_final_accuracy, "%.6f", accuracy);
    runlog_meta(&r->log, RUN_META_steps, "%lld", r->step);
    runlog_meta(&r->log, RUN_META_wall_s, "%.3f", wall_s);
}
