/* train_session.c — DDP's session of one rank (train_rank.h): the rendezvous store (rank 0
 * hosts it), the job's identity agreed through it, the comm, the state every rank starts
 * from (--resume from rank 0, then rank 0's parameters broadcast), SyncBatchNorm, the
 * reducer's buckets, and this rank's clock offset to rank 0. */
#include "train_rank.h"

#include "comm_probe.h"

#include "comm/comm.h"
#include "comm/store.h"
#include "comm/tcpstore.h"
#include "common/clock.h"
#include "common/ddp_buckets.h"
#include "common/error.h"
#include "ddp/reducer.h"
#include "launch/dist_env.h"
#include "launch/worker_link.h"
#include "probes/run_format.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* The rendezvous store.  Normally rank 0 hosts it on MASTER_PORT.  Under torchrun's
 * default rendezvous (TORCHELASTIC_USE_AGENT_STORE=True) MASTER_PORT is the agent's own
 * TCPStore: rank 0 then hosts ddpprof's store on a free port and publishes that port in the
 * agent's store, where the others read it (tcpstore.h). */
static int rank_open_store(struct rank *r, const struct dist_env *env)
{
    const struct train_opts *o = r->o;
    if (!env->agent_store) {
        r->store = store_create(env->master_addr, env->master_port, r->rank == 0, r->rank,
                                r->world, o->dev.timeout_ms);
        return r->store ? 0
                        : error_wrap("rendezvous at %s:%d", env->master_addr,
                                     env->master_port);
    }
    struct tcpstore *agent =
        tcpstore_connect(env->master_addr, env->master_port, o->dev.timeout_ms);
    if (!agent)
        return error_wrap("torchrun's agent store (TORCHELASTIC_USE_AGENT_STORE=True)");
    char key[64], val[32] = "";
    size_t len = 0;
    int rc = 0;
    snprintf(key, sizeof key, "ddpprof/store_port/%d", env->restart_count);
    if (r->rank == 0) {
        r->store = store_create_any_port(env->master_addr, 0, r->world, o->dev.timeout_ms);
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
                                o->dev.timeout_ms);
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
        runlog_meta(&r->log, RUN_META_run_id, "%s", r->run_id);
        if (r->log.meta && fflush(r->log.meta) != 0)
            return error_set("cannot write %s/meta.csv: %s", o->run.out_dir, strerror(errno));
        return store_set(r->store, "run_id", r->run_id, strlen(r->run_id));
    }
    if (store_get(r->store, "run_id", r->run_id, sizeof r->run_id - 1, &len))
        return -1;
    r->run_id[len] = '\0';
    if (r->local_rank != 0 || !o->run.out_dir)
        return 0;
    char path[4200], line[300], want[300];
    snprintf(path, sizeof path, "%s/meta.csv", o->run.out_dir);
    snprintf(want, sizeof want, "%s,%s\n", run_meta_key_name(RUN_META_run_id), r->run_id);
    int shared = 0;
    FILE *f = fopen(path, "r");
    while (f && !shared && fgets(line, sizeof line, f))
        shared = strcmp(line, want) == 0;
    if (f)
        fclose(f);
    if (shared)
        return 0;
    /* checked like rank 0's (train.c, rank_setup): not mixed with an earlier run's files */
    if ((r->restart_count == 0 && runlog_prepare(o->run.out_dir, o->run.overwrite)) ||
        runlog_open(&r->log, o->run.out_dir))
        return error_wrap("node %d's run directory", r->node_rank);
    runlog_meta(&r->log, RUN_META_run_id, "%s", r->run_id);
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

static void obs_launching(void *ctx, int bucket, size_t bytes)
{
    probe_bucket_launch(ctx, bucket, bytes);
}

static void obs_issued(void *ctx, int bucket) { probe_bucket_issued(ctx, bucket); }

static void obs_finished(void *ctx, int bucket, size_t bytes, const struct comm_span *span)
{
    probe_bucket_range(ctx, bucket, bytes, span->start_ns, span->end_ns);
}

void rank_session_observe(struct rank *r)
{
    if (r->red)
        reducer_set_observer(r->red, (struct reducer_observer){obs_launching, obs_issued,
                                                               obs_finished, r->probe});
}

int rank_session_open(struct rank *r, const struct dist_env *env)
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
    if (o->run.resume_path && rank_resume_ddp(r))
        return -1;
    if (ddp_broadcast_state(&r->m->params, r->coll))
        return -1;
    if (o->ddp.sync_bn)
        r->m->set_sync_bn(r->m, r->coll);
    size_t cap = ddp_bucket_cap_bytes(o->ddp.bucket_cap_mb);
    if (cap < sizeof(float))
        cap = sizeof(float);
    r->red = reducer_create(&r->m->params, r->dev.comm, DDP_FIRST_BUCKET_BYTES, cap);
    if (!r->red || rank_align_clock(r) || rank_calibrate_comm(r))
        return -1;
    worker_link_say("ready");
    return 0;
}
