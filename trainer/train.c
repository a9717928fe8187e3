/* train.c — one rank's training run (see train.h).
 *
 * The loop is the seeds': for each epoch, set the sampler's epoch, train on every batch
 * (forward, softmax cross-entropy, backward with the DDP reducer's hook, wait for the
 * buckets, SGD or Adam step), then evaluate on the test set and print on rank 0 the lines
 * of the model's seed: the DDP tutorial's for the ConvNet, the distributed-training
 * example's (`train | epoch: N | loss: X`, `val | epoch: N | loss: X | accuracy: Y`) for
 * ResNet18. */
#include "train.h"

#include "comm_probe.h"

#include "backend/backend.h"
#include "io/checkpoint.h"
#include "common/clock.h"
#include "probes/clock_offset.h"
#include "comm/comm.h"
#include "comm/flight.h"
#include "device.h"
#include "launch/dist_env.h"
#include "launch/worker_link.h"
#include "common/error.h"
#include "data/dataset.h"
#include "nn/model.h"
#include "ddp/reducer.h"
#include "probes/runlog.h"
#include "probes/trace_format.h"
#include "data/sampler.h"
#include "nn/scaler.h"
#include "nn/optim.h"
#include "comm/store.h"
#include "comm/tcpstore.h"

#include <cblas.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <sys/stat.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

void train_opts_default(struct train_opts *o)
{
    *o = (struct train_opts){
        .model = "convnet",
        .resnet_width = 64,
        .data_dir = "/usr/share/datasets/fashion-mnist",
        .dataset = DATASET_AUTO,
        .optimizer = OPTIM_SGD,
        .epochs = 3,
        .batch_size = 32,
        .lr = 1e-4f,
        .seed = 0,
        .shuffle = 1,
        .norm_mean = 0.0f,
        .norm_std = 1.0f,
        .mode = TRAIN_BASELINE,
        .bucket_cap_mb = 25.0,
        .sync_bn = 1,
        .timeout_ms = 300000,
        .amp = AMP_OFF,
        .scale_init = 65536.0f,
        .scale_growth = 2.0f,
        .scale_backoff = 0.5f,
        .scale_interval = 2000,
        .trace = PROBE_FULL,
    };
}

struct rank {
    const struct train_opts *o;
    int rank, world, local_rank, local_world;
    struct device dev; /* backend, comm, CPU binding */
    struct comm *coll; /* dev.comm recording each collective (comm_probe.h): every
                          collective but the reducer's buckets goes through it */
    struct model *m;
    struct optim opt;
    float lr;        /* the learning rate trained with (--lr, times the world size with
                        --lr-scale-by-world) */
    struct grad_scaler scaler;
    int start_epoch; /* epochs already done (resume) */
    int resumed;     /* state came from --resume: start_epoch and step are the checkpoint's */
    int resumed_has_run;               /* the checkpoint recorded resumed_run */
    struct checkpoint_run resumed_run; /* its world, batch size and sampler position */
    int node_rank;   /* GROUP_RANK, else rank / local_world */
    int restart_count; /* TORCHELASTIC_RESTART_COUNT: the attempt of an elastic job */
    char run_id[160];  /* the job's id (and attempt), the same on every rank */
    struct store *store;
    struct reducer *red;
    struct dataset train, test;
    enum dataset_kind dataset; /* the kind loaded (auto resolved) */
    float *x_host, *x_dev, *dlogits, *scalars; /* scalars: 3 floats on the device */
    int32_t *y_host, *y_dev;
    int64_t *indices;
    struct runlog log;
    struct probe *probe;
    struct clock_offset clock;  /* this rank's offset to rank 0 */
    long long step;
    long long epoch_steps, epoch_skipped; /* this epoch's steps; those the scaler skipped */
    long long fault_skip_step; /* test fault injection: skip this step on this rank (0: none) */
    long long fault_inf_step;  /* test fault injection: inf gradient at this step (0: none) */
    long long fault_kill_step; /* test fault injection: SIGKILL itself at this step (0: none) */
    struct host_usage usage0;  /* the host's load and this process's CPU time at the start */
    int tty;                   /* stderr is a terminal: draw a progress bar */
};

/* Fault injection for the failure tests only:
 * DDPPROF_FAULT_SKIP_STEP=RANK:STEP makes rank RANK skip training step STEP entirely: the
 * tutorial's classic bug of one rank running one batch fewer, which must end in an error
 * naming the collective, never a hang.
 * DDPPROF_FAULT_INF_STEP=RANK:STEP puts an inf into rank RANK's loss gradient at STEP: the
 * GradScaler must skip that step on every rank and back off.
 * DDPPROF_FAULT_KILL_STEP=RANK:STEP makes rank RANK SIGKILL itself as step STEP begins, in
 * the first attempt only (TORCHELASTIC_RESTART_COUNT 0): an elastic restart must recover. */
static long long fault_step(const char *var, int rank)
{
    const char *v = getenv(var);
    int r;
    long long step;
    if (v && sscanf(v, "%d:%lld", &r, &step) == 2 && r == rank)
        return step;
    return 0;
}

/* seconds on the probes' clock (CLOCK_MONOTONIC) */
static double now_s(void) { return 1e-9 * (double)clock_now_ns(); }

static void say(const struct rank *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(const struct rank *r, const char *fmt, ...)
{
    if (r->rank != 0 || r->o->quiet)
        return;
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    fflush(stdout);
}

/* Load n = count samples at indices into the device batch buffers. */
static int rank_load_batch(struct rank *r, const struct dataset *d, const int64_t *idx, int n)
{
    if (dataset_to_float(d, idx, n, r->x_host, r->y_host))
        return -1;
    size_t img = (size_t)d->c * d->h * d->w;
    struct backend *be = r->dev.be;
    be->upload(be, r->x_dev, r->x_host, (size_t)n * img * sizeof(float));
    be->upload(be, r->y_dev, r->y_host, (size_t)n * sizeof(int32_t));
    return 0;
}

/* Every rank's host clock offset to rank 0, from round trips to the store, which rank 0
 * hosts (probes/TRACE.md): kept on each rank, and published for rank 0's meta.csv. */
enum { CLOCK_ROUND_TRIPS = 16 };

static int rank_align_clock(struct rank *r)
{
    struct clock_sample samples[CLOCK_ROUND_TRIPS];
    r->clock = (struct clock_offset){0, 0};
    if (r->rank != 0) {
        for (int i = 0; i < CLOCK_ROUND_TRIPS; i++) {
            samples[i].send_ns = clock_now_ns();
            if (store_server_time(r->store, &samples[i].remote_ns))
                return error_wrap("clock alignment");
            samples[i].recv_ns = clock_now_ns();
        }
        if (clock_offset_estimate(samples, CLOCK_ROUND_TRIPS, &r->clock))
            return -1;
    }
    char key[64], val[64];
    snprintf(key, sizeof key, "clock/%d", r->rank);
    snprintf(val, sizeof val, "%lld %lld", (long long)r->clock.offset_ns,
             (long long)r->clock.rtt_ns);
    return store_set(r->store, key, val, strlen(val) + 1);
}

/* A rank that writes meta.csv (rank 0, a node leader): clock_offset_ns.rankN,
 * clock_rtt_ns.rankN and host.rankN for every rank */
static int rank_record_clocks(struct rank *r)
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
        snprintf(key, sizeof key, TRACE_META_CLOCK_OFFSET_FORMAT, k);
        runlog_meta(&r->log, key, "%lld", off);
        snprintf(key, sizeof key, "clock_rtt_ns.rank%d", k);
        runlog_meta(&r->log, key, "%lld", rtt);
        snprintf(key, sizeof key, "host/%d", k);
        if (store_get(r->store, key, val, sizeof val - 1, &len))
            return -1;
        val[len < sizeof val ? len : sizeof val - 1] = '\0';
        snprintf(key, sizeof key, "host.rank%d", k);
        runlog_meta(&r->log, key, "%s", val);
    }
    return 0;
}

/* The rendezvous store.  Normally rank 0 hosts it on MASTER_PORT.  Under torchrun's
 * default rendezvous (TORCHELASTIC_USE_AGENT_STORE=True) MASTER_PORT is the agent's own
 * TCPStore: rank 0 then hosts ddpprof's store on a free port and publishes that port in the
 * agent's store, where the others read it (tcpstore.h). */
static int rank_open_store(struct rank *r, const struct dist_env *env)
{
    const struct train_opts *o = r->o;
    if (!env->agent_store) {
        r->store = store_create(env->master_addr, env->master_port, r->rank == 0, r->rank,
                                r->world, o->timeout_ms);
        return r->store ? 0
                        : error_wrap("rendezvous at %s:%d", env->master_addr,
                                     env->master_port);
    }
    struct tcpstore *agent = tcpstore_connect(env->master_addr, env->master_port, o->timeout_ms);
    if (!agent)
        return error_wrap("torchrun's agent store (TORCHELASTIC_USE_AGENT_STORE=True)");
    char key[64], val[32] = "";
    size_t len = 0;
    int rc = 0;
    snprintf(key, sizeof key, "ddpprof/store_port/%d", env->restart_count);
    if (r->rank == 0) {
        r->store = store_create_any_port(env->master_addr, 0, r->world, o->timeout_ms);
        if (!r->store)
            rc = error_wrap("hosting the rendezvous beside torchrun's agent store");
        else
            snprintf(val, sizeof val, "%d", store_port(r->store));
        if (rc == 0 && tcpstore_set(agent, key, val, strlen(val)))
            rc = error_wrap("publishing the rendezvous port");
    } else if (tcpstore_get(agent, key, val, sizeof val - 1, &len)) {
        rc = error_wrap("waiting for rank 0's rendezvous port");
    } else {
        val[len] = '\0';
        r->store = store_create(env->master_addr, atoi(val), 0, r->rank, r->world,
                                o->timeout_ms);
        if (!r->store)
            rc = error_wrap("rendezvous at %s:%s (published in torchrun's agent store)",
                            env->master_addr, val);
    }
    tcpstore_close(agent);
    return rc;
}

/* The job's identity, agreed through the store: rank 0 names the run (torchrun's run id or
 * its own, and the attempt) and writes it first into meta.csv; every rank publishes its host.
 * A node leader (local rank 0 of another node) whose run directory does not hold rank 0's
 * meta.csv of this run (its own directory, not a shared one) writes its own meta.csv and
 * metrics.csv there, so each node's directory is a run the report can merge. */
static int rank_share_identity(struct rank *r, const struct dist_env *env)
{
    const struct train_opts *o = r->o;
    char host[256] = "", key[64];
    gethostname(host, sizeof host - 1);
    snprintf(key, sizeof key, "host/%d", r->rank);
    if (store_set(r->store, key, host, strlen(host)))
        return -1;
    size_t len = 0;
    if (r->rank == 0) {
        char base[128];
        if (env->run_id[0])
            snprintf(base, sizeof base, "%s", env->run_id);
        else
            snprintf(base, sizeof base, "%.64s-%d-%lld", host, (int)getpid(),
                     (long long)time(NULL));
        snprintf(r->run_id, sizeof r->run_id, "%s.%d", base, r->restart_count);
        runlog_meta(&r->log, "run_id", "%s", r->run_id);
        if (r->log.meta && fflush(r->log.meta) != 0)
            return error_set("cannot write %s/meta.csv: %s", o->out_dir, strerror(errno));
        return store_set(r->store, "run_id", r->run_id, strlen(r->run_id));
    }
    if (store_get(r->store, "run_id", r->run_id, sizeof r->run_id - 1, &len))
        return -1;
    r->run_id[len] = '\0';
    if (r->local_rank != 0 || !o->out_dir)
        return 0;
    char path[4200], line[300], want[300];
    snprintf(path, sizeof path, "%s/meta.csv", o->out_dir);
    snprintf(want, sizeof want, "run_id,%s\n", r->run_id);
    int shared = 0;
    FILE *f = fopen(path, "r");
    while (f && !shared && fgets(line, sizeof line, f))
        shared = strcmp(line, want) == 0;
    if (f)
        fclose(f);
    if (shared)
        return 0;
    /* checked like rank 0's (rank_setup): not mixed with an earlier run's files */
    if ((r->restart_count == 0 && runlog_prepare(o->out_dir, o->overwrite)) ||
        runlog_open(&r->log, o->out_dir))
        return error_wrap("node %d's run directory", r->node_rank);
    runlog_meta(&r->log, "run_id", "%s", r->run_id);
    return 0;
}

/* --resume in DDP: rank 0 reads the checkpoint and sends its bytes to every rank through
 * the comm (the other nodes need no copy of rank 0's run directory); each rank loads them
 * from a private temporary file.  The size goes through the store, -1 and rank 0's error
 * when it could not read the file, so the others fail with its reason. */
static int rank_resume_ddp(struct rank *r)
{
    const struct train_opts *o = r->o;
    struct backend *be = r->dev.be;
    char text[1200] = "";
    size_t len = 0;
    long long bytes = -1;
    unsigned char *data = NULL;
    if (r->rank == 0) {
        FILE *f = fopen(o->resume_path, "rb");
        struct stat st;
        if (!f || fstat(fileno(f), &st) != 0 || !(data = malloc((size_t)st.st_size + 4)) ||
            fread(data, 1, (size_t)st.st_size, f) != (size_t)st.st_size) {
            snprintf(text, sizeof text, "-1 --resume %s: cannot read it (%s)", o->resume_path,
                     strerror(errno ? errno : EIO));
        } else {
            bytes = (long long)st.st_size;
            snprintf(text, sizeof text, "%lld", bytes);
        }
        if (f)
            fclose(f);
        if (store_set(r->store, "resume_bytes", text, strlen(text))) {
            free(data);
            return -1;
        }
        if (bytes < 0) {
            free(data);
            return error_set("%s", text + 3);
        }
    } else {
        if (store_get(r->store, "resume_bytes", text, sizeof text - 1, &len))
            return -1;
        text[len] = '\0';
        bytes = atoll(text);
        if (bytes < 0)
            return error_set("rank 0 could not resume: %s", text + 3);
        if (!(data = malloc((size_t)bytes + 4)))
            return error_set("out of memory for a %lld-byte checkpoint", bytes);
    }
    size_t words = ((size_t)bytes + 3) / 4;
    float *dev = be->alloc(be, words * sizeof(float) + 4);
    int rc = dev ? 0 : error_set("out of memory for the checkpoint");
    if (rc == 0 && r->rank == 0)
        be->upload(be, dev, data, (size_t)bytes);
    if (rc == 0 && r->coll->broadcast(r->coll, dev, words, COMM_F32, 0))
        rc = error_wrap("receiving the checkpoint from rank 0");
    if (rc == 0 && r->rank != 0)
        be->download(be, data, dev, (size_t)bytes);
    if (dev)
        be->free(be, dev);
    const char *path = o->resume_path;
    char tmp[128];
    if (rc == 0 && r->rank != 0) {
        const char *dir = getenv("TMPDIR");
        snprintf(tmp, sizeof tmp, "%.80s/ddpprof-resume-XXXXXX", dir && *dir ? dir : "/tmp");
        int fd = mkstemp(tmp);
        size_t done = 0;
        ssize_t w = 1;
        while (fd >= 0 && done < (size_t)bytes && w != 0) {
            w = write(fd, data + done, (size_t)bytes - done);
            if (w > 0)
                done += (size_t)w;
            else if (w < 0 && errno != EINTR)
                break;
        }
        if (fd < 0 || done < (size_t)bytes) /* w == 0: nothing more fits */
            rc = error_set("cannot write the checkpoint to %s: %s", tmp,
                           fd < 0 || w < 0 ? strerror(errno) : "no space left (short write)");
        if (fd >= 0)
            close(fd);
        path = tmp;
    }
    free(data);
    if (rc == 0 && checkpoint_resume(path, &r->m->params, &r->opt, &r->scaler, o->model,
                                     &r->start_epoch, &r->step))
        rc = error_wrap("--resume");
    if (rc == 0 && (r->resumed_has_run = checkpoint_read_run(path, &r->resumed_run)) < 0)
        rc = error_wrap("--resume %s", o->resume_path);
    if (r->rank != 0 && path != o->resume_path)
        unlink(path);
    r->resumed = rc == 0;
    return rc;
}

static void obs_launching(void *ctx, int bucket, size_t bytes)
{
    probe_bucket_launch(ctx, bucket, bytes);
}

static void obs_issued(void *ctx, int bucket) { probe_bucket_issued(ctx, bucket); }

static void obs_finished(void *ctx, int bucket, size_t bytes, const struct comm_span *span)
{
    probe_bucket_range(ctx, bucket, bytes, span->start_ns, span->end_ns);
}

/* --resume from a checkpoint whose epochs are all done is refused: nothing would train;
 * so is one taken mid-epoch by a run of another world or batch size, whose sampler
 * position would point at other samples here */
static int rank_check_resume_left(const struct rank *r)
{
    const struct train_opts *o = r->o;
    const struct checkpoint_run *cr = &r->resumed_run;
    if (r->start_epoch < o->epochs && r->resumed_has_run && cr->position > 0 &&
        (cr->world_size != r->world || cr->batch_size != o->batch_size)) {
        char what[160];
        int n = 0;
        if (cr->world_size != r->world)
            n += snprintf(what + n, sizeof what - (size_t)n, "world size %d, now %d",
                          cr->world_size, r->world);
        if (cr->batch_size != o->batch_size)
            snprintf(what + n, sizeof what - (size_t)n, "%sbatch size %d per rank, now %d",
                     n ? " and " : "", cr->batch_size, o->batch_size);
        return error_set("--resume: %s was taken mid-epoch (epoch %d, %lld samples into "
                         "each rank's share) with %s: the rest of that epoch would train "
                         "other samples; resume with the same --batch-size and ranks, or "
                         "from an epoch-end checkpoint",
                         o->resume_path, r->start_epoch + 1, cr->position, what);
    }
    if (r->start_epoch < o->epochs)
        return 0;
    return error_set("--resume: %s has %d epoch(s) done and --epochs is %d: nothing left "
                     "to train (give --epochs above %d)",
                     o->resume_path, r->start_epoch, o->epochs, r->start_epoch);
}

/* The rank's probe (rank<N>.trace.csv in --out, or an off one without --out). */
static int rank_open_probe(struct rank *r)
{
    const struct train_opts *o = r->o;
    struct probe_opts po;
    probe_opts_default(&po);
    po.rank = r->rank;
    po.run_dir = o->out_dir ? o->out_dir : ".";
    po.mode = o->out_dir ? o->trace : PROBE_OFF;
    device_probe_opts(&r->dev, &po);
    po.quiet = r->rank != 0;
    if (!(r->probe = probe_create(&po)))
        return error_wrap("probes");
    return 0;
}

static int rank_setup_ddp(struct rank *r, const struct dist_env *env)
{
    const struct train_opts *o = r->o;
    worker_link_say("joining"); /* the launcher bounds the rendezvous (worker_link.h) */
    if (rank_open_store(r, env) || rank_share_identity(r, env))
        return -1;
    if (device_comm_open(&r->dev, r->store, r->rank, r->world, store_port(r->store)))
        return -1;
    /* the probe before the first collective, so that the initial broadcast is recorded */
    if (rank_open_probe(r) || !(r->coll = comm_probe_wrap(r->dev.comm, r->probe)))
        return -1;
    if (o->resume_path && rank_resume_ddp(r))
        return -1;
    if (ddp_broadcast_state(&r->m->params, r->coll))
        return -1;
    if (o->sync_bn)
        r->m->set_sync_bn(r->m, r->coll);
    size_t cap = (size_t)(o->bucket_cap_mb * 1048576.0);
    if (cap < sizeof(float))
        cap = sizeof(float);
    r->red = reducer_create(&r->m->params, r->dev.comm, 1u << 20, cap);
    if (!r->red || rank_align_clock(r))
        return -1;
    worker_link_say("ready");
    return 0;
}

static void rank_write_meta(struct rank *r)
{
    const struct train_opts *o = r->o;
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    struct runlog *l = &r->log;
    runlog_meta(l, "model", "%s", o->model);
    if (strcmp(o->model, "resnet18") == 0)
        runlog_meta(l, "resnet_width", "%d", o->resnet_width);
    runlog_meta(l, "mode", "%s", o->mode == TRAIN_DDP ? "ddp" : "baseline");
    device_write_meta(&r->dev, l);
    runlog_meta(l, "world_size", "%d", r->world);
    runlog_meta(l, "threads_per_rank", "%d", o->threads);
    runlog_meta(l, "dataset", "%s", dataset_kind_name(r->dataset));
    runlog_meta(l, "data", "%s", r->dataset == DATASET_SYNTHETIC ? "synthetic" : o->data_dir);
    runlog_meta(l, "train_samples", "%d", r->train.n);
    runlog_meta(l, "test_samples", "%d", r->test.n);
    runlog_meta(l, "batch_size", "%d", o->batch_size);
    runlog_meta(l, "global_batch_size", "%d", o->batch_size * r->world);
    runlog_meta(l, "epochs", "%d", o->epochs);
    runlog_meta(l, "drop_last", "%d", o->drop_last);
    runlog_meta(l, "optimizer", "%s", optim_name((enum optim_kind)o->optimizer));
    runlog_meta(l, "lr", "%g", (double)r->lr);
    runlog_meta(l, "lr_scale_by_world", "%d", o->lr_scale_by_world);
    runlog_meta(l, "momentum", "%g", (double)o->momentum);
    runlog_meta(l, "weight_decay", "%g", (double)o->weight_decay);
    runlog_meta(l, "seed", "%llu", (unsigned long long)o->seed);
    runlog_meta(l, "shuffle", "%d", o->shuffle);
    char norm[160] = "";
    for (int ch = 0, at = 0; ch < r->train.c && at < (int)sizeof norm; ch++)
        at += snprintf(norm + at, sizeof norm - (size_t)at, "%s%g,%g", ch ? ";" : "",
                       (double)r->train.mean[ch], (double)r->train.std[ch]);
    runlog_meta(l, "normalize", "%s", norm);
    static const char *const amp_names[] = {"off", "fp16", "bf16"};
    runlog_meta(l, "amp", "%s", amp_names[o->amp]);
    runlog_meta(l, "resume", "%s", o->resume_path ? o->resume_path : "");
    runlog_meta(l, "trace", "%s", probe_mode_name(o->trace));
    const char *note = probe_gpu_note(r->probe);
    if (note && *note)
        runlog_meta(l, "cupti", "%s", note);
    if (r->red)
        for (int b = 0; b < reducer_bucket_count(r->red); b++) {
            int np;
            size_t bytes;
            char key[64];
            reducer_bucket_info(r->red, b, &np, &bytes);
            snprintf(key, sizeof key, "bucket.%d.params", b);
            runlog_meta(l, key, "%d", np);
            snprintf(key, sizeof key, "bucket.%d.bytes", b);
            runlog_meta(l, key, "%zu", bytes);
        }
    if (o->mode == TRAIN_DDP) {
        runlog_meta(l, "sync_bn", "%d", o->sync_bn);
        runlog_meta(l, "bucket_cap_mb", "%g", o->bucket_cap_mb);
        runlog_meta(l, "buckets", "%d", r->red ? reducer_bucket_count(r->red) : 0);
    }
    runlog_meta(l, "init", "%s", o->init_path ? o->init_path : "");
    runlog_meta(l, "ddpprof_version", "%s", DDPPROF_VERSION);
    runlog_meta(l, "git_revision", "%s", DDPPROF_GIT_REV);
    runlog_meta(l, "openblas", "%s", openblas_get_config());
    runlog_meta(l, "hostname", "%s", host);
    runlog_meta(l, "start_time", "%lld", (long long)time(NULL));
    runlog_meta(l, "host_cores", "%ld", sysconf(_SC_NPROCESSORS_ONLN));
    runlog_meta(l, "host_load_start", "%.2f", r->usage0.load1);
    if (o->mode != TRAIN_DDP)
        return;
    runlog_meta(l, "node_rank", "%d", r->node_rank);
    runlog_meta(l, "local_world_size", "%d", r->local_world);
    runlog_meta(l, "restarts", "%d", r->restart_count);
    /* why the earlier attempts failed, as the node agent saw it (one line each) */
    const char *causes = getenv("DDPPROF_RESTART_CAUSES");
    for (int i = 1; causes && *causes && i <= r->restart_count; i++) {
        size_t n = strcspn(causes, "\n");
        char key[64];
        snprintf(key, sizeof key, "restart.%d.cause", i);
        runlog_meta(l, key, "%.*s", (int)n, causes);
        causes += n + (causes[n] == '\n');
    }
    if (r->resumed) {
        runlog_meta(l, "resumed_epoch", "%d", r->start_epoch);
        runlog_meta(l, "resumed_step", "%lld", r->step);
    }
    if (o->checkpoint_every)
        runlog_meta(l, "checkpoint_every", "%ld", o->checkpoint_every);
}

/* What tells a busy host (report/FORMULAS.md "Figures measured under load"): every rank's
 * CPU and wall seconds since it started (published through the store), and on rank 0 the
 * host's load average at the end and the CPU time all of its processes used and the
 * hypervisor stole meanwhile; ranks_cpu_s sums the ranks on rank 0's host, so the report
 * can tell the CPU time of other programs. */
static int rank_record_usage(struct rank *r, double wall_s)
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
        snprintf(key, sizeof key, "cpu_s.rank%d", k);
        runlog_meta(&r->log, key, "%.3f", c);
        snprintf(key, sizeof key, "wall_s.rank%d", k);
        runlog_meta(&r->log, key, "%.3f", w);
        if (k == 0 || strcmp(where, host) == 0)
            local_cpu += c;
    }
    runlog_meta(&r->log, "ranks_cpu_s", "%.3f", local_cpu);
    runlog_meta(&r->log, "host_load_end", "%.2f", u.load1);
    if (u.have_stat && r->usage0.have_stat) {
        runlog_meta(&r->log, "host_busy_s", "%.3f", u.busy_s - r->usage0.busy_s);
        runlog_meta(&r->log, "host_steal_s", "%.3f", u.steal_s - r->usage0.steal_s);
    }
    return 0;
}

int train_check_inputs(const struct train_opts *o)
{
    struct dataset_request rq = {.kind = (enum dataset_kind)o->dataset, .dir = o->data_dir,
                                 .seed = o->seed, .norm_mean = o->norm_mean,
                                 .norm_std = o->norm_std};
    if (model_input(o->model, &rq.c, &rq.h, &rq.w, &rq.classes))
        return -1;
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

static int rank_setup(struct rank *r, const struct dist_env *env)
{
    const struct train_opts *o = r->o;
    /* an elastic restart's directory holds the earlier attempts (attempt-K, moved aside by
     * the node agent): only the first attempt checks --out is free */
    if (r->rank == 0 && o->out_dir &&
        ((r->restart_count == 0 && runlog_prepare(o->out_dir, o->overwrite)) ||
         runlog_open(&r->log, o->out_dir)))
        return -1;
    if (device_open(&r->dev, o, r->rank, r->local_rank, r->local_world))
        return -1;
    struct backend *be = r->dev.be;
    const struct model_opts mo = {.width = o->resnet_width};
    if (!(r->m = model_create_opts(o->model, be, o->seed, &mo)))
        return -1;
    /* the data set the model's input asks for (dataset.h); every rank loads the same */
    const struct dataset_request rq = {.kind = (enum dataset_kind)o->dataset,
                                       .dir = o->data_dir, .c = r->m->in_c, .h = r->m->in_h,
                                       .w = r->m->in_w, .classes = r->m->classes,
                                       .seed = o->seed,
                                       .norm_mean = o->norm_mean, .norm_std = o->norm_std};
    char note[512];
    if (dataset_open(&rq, &r->train, &r->test, &r->dataset, note, sizeof note))
        return -1;
    if (note[0])
        say(r, "ddpprof: %s\n", note);
    if (o->limit > 0 && o->limit < r->train.n)
        r->train.n = (int)o->limit;
    if (o->test_limit > 0 && o->test_limit < r->test.n)
        r->test.n = (int)o->test_limit;
    if (o->init_path && checkpoint_load_model(o->init_path, &r->m->params))
        return error_wrap("--init");
    r->lr = o->lr_scale_by_world ? o->lr * (float)r->world : o->lr;
    const struct optim_config oc = {.kind = (enum optim_kind)o->optimizer, .lr = r->lr,
                                    .weight_decay = o->weight_decay, .momentum = o->momentum,
                                    .beta1 = ADAM_BETA1, .beta2 = ADAM_BETA2, .eps = ADAM_EPS};
    if (optim_init(&r->opt, &r->m->params, &oc))
        return -1;
    scaler_init(&r->scaler, o->amp == AMP_F16);
    if (r->scaler.enabled) {
        r->scaler.scale = o->scale_init;
        r->scaler.growth_factor = o->scale_growth;
        r->scaler.backoff_factor = o->scale_backoff;
        r->scaler.growth_interval = o->scale_interval;
    }
    if (o->amp != AMP_OFF && r->m->set_amp(r->m, o->amp))
        return -1;
    /* in DDP rank 0 alone reads --resume, once the comm is up (rank_resume_ddp) */
    if (o->resume_path && o->mode != TRAIN_DDP) {
        if (checkpoint_resume(o->resume_path, &r->m->params, &r->opt, &r->scaler, o->model,
                              &r->start_epoch, &r->step))
            return error_wrap("--resume");
        if ((r->resumed_has_run = checkpoint_read_run(o->resume_path, &r->resumed_run)) < 0)
            return error_wrap("--resume");
        r->resumed = 1;
    }
    int b = o->batch_size;
    size_t img = (size_t)r->m->in_c * r->m->in_h * r->m->in_w;
    r->x_host = malloc((size_t)b * img * sizeof(float));
    r->y_host = malloc((size_t)b * sizeof(int32_t));
    r->indices = malloc(((size_t)(r->train.n > r->test.n ? r->train.n : r->test.n) + 1) *
                        sizeof(int64_t));
    r->x_dev = be->alloc(be, (size_t)b * img * sizeof(float));
    r->y_dev = be->alloc(be, (size_t)b * sizeof(int32_t));
    r->dlogits = be->alloc(be, (size_t)b * r->m->classes * sizeof(float));
    r->scalars = be->alloc(be, 3 * sizeof(float));
    if (!r->x_host || !r->y_host || !r->indices || !r->x_dev || !r->y_dev || !r->dlogits ||
        !r->scalars)
        return error_set("out of memory for a batch of %d", b);
    if (o->out_dir && mkdir_parents(o->out_dir)) /* ranks > 0 write their trace here too */
        return -1;
    if (o->mode == TRAIN_DDP && rank_setup_ddp(r, env))
        return -1;
    if (r->resumed && rank_check_resume_left(r))
        return -1;
    if (!r->probe && rank_open_probe(r))
        return -1;
    if (r->red)
        reducer_set_observer(r->red, (struct reducer_observer){obs_launching, obs_issued,
                                                               obs_finished, r->probe});
    rank_write_meta(r);
    if (r->store && rank_record_clocks(r))
        return -1;
    return 0;
}

/* failed: this rank is giving up, so it does not wait for the others at the store.
 * Returns -1 (error_set) when the trace lost rows or meta.csv or metrics.csv could not be
 * completed on disk: a run whose files are incomplete is a failed run. */
static int rank_teardown(struct rank *r, int failed)
{
    struct backend *be = r->dev.be;
    char lost[1024] = ""; /* the trace's error, kept past the teardown below */
    if (be) {
        be->free(be, r->x_dev);
        be->free(be, r->y_dev);
        be->free(be, r->dlogits);
        be->free(be, r->scalars);
    }
    if (r->probe && probe_destroy(r->probe) && !failed)
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
    free(r->x_host);
    free(r->y_host);
    free(r->indices);
    int rc = runlog_close(&r->log);
    return lost[0] ? error_set("%s", lost) : rc;
}

/* One optimisation step on n samples: forward, loss, backward (scaled by the GradScaler,
 * buckets all-reduced as gradients become ready), unscale and inf check, SGD step unless
 * an inf/nan was found.  Fills the step's loss (global mean), scale and found_inf. */
static int rank_step(struct rank *r, int n, struct step_metrics *sm)
{
    struct model *m = r->m;
    struct backend *be = r->dev.be;
    const float *logits;
    probe_push(r->probe, PROBE_FORWARD);
    if (m->forward(m, r->x_dev, n, 1, &logits))
        return -1;
    /* the loss stays on the device until it is logged, after the step's collectives:
     * the host runs ahead of the GPU through backward, as PyTorch's loss.item() at the end */
    be->softmax_xent_dev(be, n, m->classes, logits, r->y_dev, r->dlogits, r->scalars);
    if (be->status(be)) /* errors seen so far (no wait) */
        return -1;
    probe_pop(r->probe);
    probe_push(r->probe, PROBE_BACKWARD);
    size_t nd = (size_t)n * m->classes;
    sm->loss_scale = r->scaler.scale;
    if (r->scaler.enabled) /* scaler.scale(loss).backward() */
        be->scale(be, nd, r->scaler.scale, r->dlogits, r->dlogits);
    if (r->step + 1 == r->fault_inf_step) {
        float inf = 1.0f / 0.0f;
        be->upload(be, r->dlogits, &inf, sizeof inf);
    }
    /* under autocast the model's backward casts dlogits back to the half type (the
     * backward of its logits' cast to fp32 for the loss), where an overflow becomes inf */
    struct grad_hook hook = {0};
    if (r->red)
        hook = reducer_hook(r->red);
    if (m->backward(m, r->dlogits, r->red ? &hook : NULL))
        return -1;
    probe_pop(r->probe);
    if (r->red && reducer_finish(r->red)) /* the exposed wait: between backward and optimizer */
        return -1;
    probe_push(r->probe, PROBE_OPTIMIZER);
    if (r->red) { /* the loss for metrics.csv: the global mean, on the device */
        be->scale(be, 1, 1.0f / (float)r->world, r->scalars, r->scalars);
        /* stream-ordered; settle bounds the read below by the comm's timeout (it also
         * covers the buckets and SyncBatchNorm's collectives, joined without a host wait) */
        if (comm_allreduce_join(r->coll, r->scalars, 1, COMM_F32) || comm_settle(r->coll))
            return error_wrap("all-reducing the loss");
    }
    float l = NAN;
    be->download(be, &l, r->scalars, sizeof l); /* the step's loss read (a host sync) */
    if (be->status(be)) /* the download synced: covers the step so far */
        return -1;
    sm->loss = l;
    /* fp32 and bf16 have no GradScaler to skip such a step: the run has diverged */
    if (!r->scaler.enabled && !isfinite(l))
        return error_set("the loss is %s%s: training has diverged (%s has no GradScaler to "
                         "skip the step); lower --lr, or check the data",
                         isnan(l) ? "nan" : l > 0 ? "inf" : "-inf",
                         r->world > 1 ? " (the mean over the ranks)" : "",
                         r->o->amp == AMP_BF16 ? "bf16" : "fp32");
    if (scaler_unscale(&r->scaler, &m->params, r->coll, r->scalars, &sm->found_inf))
        return -1;
    if (!sm->found_inf && optim_step(&r->opt))
        return -1;
    scaler_update(&r->scaler, sm->found_inf);
    r->epoch_steps++;
    r->epoch_skipped += sm->found_inf != 0;
    probe_pop(r->probe);
    return 0;
}

/* rank 0's progress bar on a terminal: "epoch 1/3 [#####     ] 52% 980/1875 loss 0.61";
 * under ddpprof's launcher (stderr a pipe) the launcher draws it for the job */
static void progress_bar(const struct rank *r, int epoch, int64_t done, int64_t total,
                         double loss)
{
    if (r->rank != 0 || r->o->quiet || total <= 0)
        return;
    if (!r->tty) {
        worker_link_say("progress %d %d %lld %lld %.4f", epoch + 1, r->o->epochs,
                        (long long)done * r->world, (long long)total * r->world, loss);
        return;
    }
    int width = 30, fill = (int)(width * done / total);
    char bar[64];
    for (int i = 0; i < width; i++)
        bar[i] = i < fill ? '#' : ' ';
    bar[width] = '\0';
    fprintf(stderr, "\r  epoch %d/%d [%s] %3d%% %lld/%lld images, loss %.4f", epoch + 1,
            r->o->epochs, bar, (int)(100 * done / total), (long long)done, (long long)total,
            loss);
    if (done == total)
        fputc('\n', stderr);
    fflush(stderr);
}

static int rank_train_epoch(struct rank *r, int epoch, double *mean_loss)
{
    const struct train_opts *o = r->o;
    struct sampler s;
    if (sampler_init(&s, r->train.n, r->world, r->rank, o->shuffle, (int64_t)o->seed, 0))
        return -1;
    sampler_set_epoch(&s, epoch);
    r->epoch_steps = r->epoch_skipped = 0;
    if (sampler_indices(&s, r->indices))
        return -1;
    int64_t count = sampler_num_samples(&s);
    if (o->drop_last) /* DataLoader(drop_last=True): no incomplete last batch */
        count -= count % o->batch_size;
    double sum = 0.0;
    int batches = 0;
    /* resumed from a checkpoint taken mid-epoch (--checkpoint-every): skip the batches
     * that checkpoint had done; steps per epoch are those of the run that wrote it, the
     * same world size and batch size */
    int64_t per_epoch = (count + o->batch_size - 1) / o->batch_size, first = 0;
    if (r->resumed && epoch == r->start_epoch && r->resumed_has_run) {
        first = r->resumed_run.position; /* same world and batch size: checked at setup */
        if (first >= count && first > 0)
            return error_set("--resume %s: its sampler position %lld is past this epoch's "
                             "%lld samples per rank (was --limit or --drop-last changed?)",
                             o->resume_path, (long long)first, (long long)count);
    } else if (r->resumed && epoch == r->start_epoch) { /* a checkpoint without them */
        int64_t done = r->step - (int64_t)epoch * per_epoch;
        if (done > 0 && done < per_epoch)
            first = done * o->batch_size;
    }
    for (int64_t at = first; at < count; at += o->batch_size) {
        int n = (int)(count - at < o->batch_size ? count - at : o->batch_size);
        struct step_metrics sm = {.step = r->step + 1, .epoch = epoch + 1, .lr = r->lr,
                                  .images = (int64_t)n * r->world};
        if (r->step + 1 == r->fault_kill_step) {
            fflush(NULL);
            raise(SIGKILL);
        }
        if (r->step + 1 == r->fault_skip_step) {
            r->step++;
            continue;
        }
        probe_set_step(r->probe, r->step + 1, epoch + 1);
        probe_push(r->probe, PROBE_STEP);
        probe_push(r->probe, PROBE_DATA);
        int rc = rank_load_batch(r, &r->train, r->indices + at, n);
        probe_pop(r->probe);
        if (rc || rank_step(r, n, &sm))
            return error_wrap("epoch %d step %lld", epoch + 1, r->step + 1);
        probe_pop(r->probe);
        r->step++;
        sum += sm.loss;
        batches++;
        if (runlog_metrics(&r->log, &sm))
            return -1;
        /* --checkpoint-every: not on an epoch's last step, whose epoch checkpoint follows */
        if (o->checkpoint_every && r->step % o->checkpoint_every == 0 && at + n < count &&
            r->rank == 0 && o->out_dir) {
            char path[4200];
            snprintf(path, sizeof path, "%s/checkpoint.safetensors", o->out_dir);
            const struct checkpoint_run cr = {.world_size = r->world,
                                              .batch_size = o->batch_size,
                                              .position = at + n};
            if (checkpoint_save_run(path, &r->m->params, &r->opt, &r->scaler, o->model, epoch,
                                    r->step, &cr))
                return -1;
        }
        if (at + n == count || batches % 20 == 0)
            progress_bar(r, epoch, at + n, count, sm.loss);
    }
    *mean_loss = batches ? sum / batches : 0.0;
    return 0;
}

/* A val loss of nan or inf under AMP: the evaluation's half-precision forward overflowed
 * (fp16 holds at most 65504) or met a nan; the GradScaler guards the training steps only,
 * so nothing stopped it.  One warning line on stderr naming the cause and the way out. */
static void rank_warn_val_loss(const struct rank *r, int epoch, double val_loss)
{
    const int f16 = r->o->amp == AMP_F16;
    fprintf(stderr,
            "ddpprof: warning: epoch %d's val loss is %s under --amp %s: the evaluation's %s "
            "forward %s, and the GradScaler guards only the training steps (it skipped %lld "
            "of this epoch's %lld for inf/nan gradients); the weights outgrew %s: lower --lr%s\n",
            epoch + 1, isnan(val_loss) ? "nan" : "inf", f16 ? "fp16" : "bf16",
            f16 ? "fp16" : "bf16",
            f16 ? "overflowed (a value above fp16's 65504 became inf)" : "met an inf or nan",
            r->epoch_skipped, r->epoch_steps, f16 ? "fp16" : "bf16",
            f16 ? ", or use --amp bf16 (fp32's range)" : "");
}

/* accuracy and mean loss per sample on the test set; in DDP each rank evaluates its
 * DistributedSampler share and (size, correct, loss sum) are reduced to rank 0, as the
 * tutorial does for the accuracy */
static int rank_evaluate(struct rank *r, double *accuracy, double *mean_loss)
{
    const struct train_opts *o = r->o;
    struct backend *be = r->dev.be;
    struct sampler s;
    if (sampler_init(&s, r->test.n, r->world, r->rank, 0, 0, 0) || sampler_indices(&s, r->indices))
        return -1;
    int64_t count = sampler_num_samples(&s);
    long correct = 0;
    double loss_sum = 0.0;
    for (int64_t at = 0; at < count; at += o->batch_size) {
        int n = (int)(count - at < o->batch_size ? count - at : o->batch_size);
        const float *logits;
        if (rank_load_batch(r, &r->test, r->indices + at, n) ||
            r->m->forward(r->m, r->x_dev, n, 0, &logits))
            return error_wrap("evaluation");
        correct += be->count_correct(be, n, r->m->classes, logits, r->y_dev);
        loss_sum += (double)n * be->softmax_xent(be, n, r->m->classes, logits, r->y_dev, NULL);
    }
    float tally[3] = {(float)count, (float)correct, (float)loss_sum};
    struct comm *comm = r->coll;
    if (comm) {
        be->upload(be, r->scalars, tally, sizeof tally);
        if (comm->reduce(comm, r->scalars, 3, COMM_F32, 0))
            return error_wrap("reducing the test accuracy");
        be->download(be, tally, r->scalars, sizeof tally);
    }
    *accuracy = tally[0] > 0 ? (double)tally[1] / (double)tally[0] : 0.0;
    *mean_loss = tally[0] > 0 ? (double)tally[2] / (double)tally[0] : 0.0;
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
    if (o.threads <= 0) {
        long cores = sysconf(_SC_NPROCESSORS_ONLN);
        o.threads = cores / r.local_world > 0 ? (int)(cores / r.local_world) : 1;
    }
    r.tty = isatty(STDERR_FILENO);
    r.usage0 = usage0;
    flight_set_dir(o.out_dir); /* a failed collective leaves rankN.flight.csv beside the trace */
    r.fault_skip_step = fault_step("DDPPROF_FAULT_SKIP_STEP", r.rank);
    r.fault_inf_step = fault_step("DDPPROF_FAULT_INF_STEP", r.rank);
    if (r.restart_count == 0)
        r.fault_kill_step = fault_step("DDPPROF_FAULT_KILL_STEP", r.rank);
    int rc = rank_setup(&r, env);
    double accuracy = 0.0, val_loss = 0.0;
    /* the printed lines of the model's seed: the distributed-training example's for its
     * ResNet18, the DDP tutorial's otherwise */
    const int example_lines = strcmp(o.model, "resnet18") == 0;
    for (int epoch = r.start_epoch; rc == 0 && epoch < o.epochs; epoch++) {
        if (!example_lines)
            say(&r, "begin training of epoch %d/%d\n", epoch + 1, o.epochs);
        double t0 = now_s(), loss = 0.0;
        rc = rank_train_epoch(&r, epoch, &loss);
        double dt = now_s() - t0;
        if (rc == 0) {
            if (example_lines)
                say(&r, "train | epoch: %d | loss: %.4f\n", epoch + 1, loss);
            else
                say(&r, "epoch %d: mean loss %.4f, %.2f s, %.0f images/s\nbegin testing\n",
                    epoch + 1, loss, dt, (double)r.train.n / dt);
            probe_set_step(r.probe, 0, epoch + 1);
            probe_push(r.probe, PROBE_EVAL);
            rc = rank_evaluate(&r, &accuracy, &val_loss);
            probe_pop(r.probe);
            /* every epoch's rows on disk (TRACE.md); rows lost so far (a full disk) fail
             * the run now, before the epoch's checkpoint takes the last free space */
            probe_flush(r.probe);
            struct probe_stats ps;
            probe_stats(r.probe, &ps);
            if (rc == 0 && ps.rows_lost)
                rc = -1; /* probe_flush's error: the trace's, set last */
        }
        for (int k = 0; k < 2 && rc == 0 && r.rank == 0 && o.out_dir; k++) {
            /* every epoch for --resume; with --save-every-epoch also epoch_N, as the
             * example's epoch_N.pth */
            char path[4200];
            if (k == 0)
                snprintf(path, sizeof path, "%s/checkpoint.safetensors", o.out_dir);
            else if (o.save_every_epoch)
                snprintf(path, sizeof path, "%s/epoch_%d.safetensors", o.out_dir, epoch + 1);
            else
                break;
            const struct checkpoint_run cr = {.world_size = r.world,
                                              .batch_size = o.batch_size, .position = 0};
            rc = checkpoint_save_run(path, &r.m->params, &r.opt, &r.scaler, o.model,
                                     epoch + 1, r.step, &cr);
        }
        if (rc == 0 && r.rank == 0 && o.amp != AMP_OFF && !isfinite(val_loss))
            rank_warn_val_loss(&r, epoch, val_loss);
        if (rc == 0) {
            if (example_lines)
                say(&r, "val | epoch: %d | loss: %.4f | accuracy: %.4f\n\n", epoch + 1,
                    val_loss, accuracy);
            else
                say(&r, "Accuracy is %.2f%%\n", 100.0 * accuracy);
            char key[64];
            snprintf(key, sizeof key, "epoch.%d.train_s", epoch + 1);
            runlog_meta(&r.log, key, "%.3f", dt);
            snprintf(key, sizeof key, "epoch.%d.accuracy", epoch + 1);
            if (r.rank == 0) { /* the reduced tallies are rank 0's; a node leader's are its own */
                runlog_meta(&r.log, key, "%.6f", accuracy);
                snprintf(key, sizeof key, "epoch.%d.val_loss", epoch + 1);
                runlog_meta(&r.log, key, "%.6f", val_loss);
            }
            snprintf(key, sizeof key, "epoch.%d.train_loss", epoch + 1);
            runlog_meta(&r.log, key, "%.6f", loss);
        }
    }
    double elapsed = now_s() - t_start;
    if (rc == 0)
        rc = rank_record_usage(&r, elapsed);
    if (rc == 0) {
        if (r.rank == 0)
            runlog_meta(&r.log, "final_accuracy", "%.6f", accuracy);
        runlog_meta(&r.log, "steps", "%lld", r.step);
        runlog_meta(&r.log, "wall_s", "%.3f", elapsed);
        say(&r, "\ntime elapsed: %.2f seconds\n", elapsed);
    }
    if (rank_teardown(&r, rc != 0) && rc == 0)
        rc = -1;
    return rc;
}
