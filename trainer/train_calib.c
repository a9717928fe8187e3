/* train_calib.c — the comm's short all-reduce microbenchmark at DDP setup: a few sizes, a
 * few repetitions each, recorded as trace rows for `ddpprof predict`'s comm calibration
 * (probes/TRACE.md "Calibration rows"; report/FORMULAS.md "Predictions").  Rows: phase
 * comm.allreduce, step -1 (outside every training step, so no per-step statistic counts
 * them), name calib.allreduce, bytes the payload, stream 1, the host clock of when the
 * transport ran the collective (its span; the call's where the transport cannot tell).
 * First the small all-reduce (128 bytes), 9 times: its time is the least an all-reduce
 * takes here (`ddpprof predict`'s floor; on a CPU rank in a VM, waking a waiting rank, up
 * to a scheduler tick, more than the wire's latency); then the sizes, 3 times each, for the
 * line (latency and bandwidth). */
#include "train_rank.h"

#include "backend/backend.h"
#include "comm/comm.h"
#include "common/clock.h"
#include "common/error.h"
#include "probes/trace_writer.h"

#include <stddef.h>

#define CALIB_REPS 3               /* recorded repetitions per size, after one unrecorded */
#define CALIB_BUDGET_MS 400.0 /* the next size is run only if the ranks' mean time spent
                                 so far plus its estimate (the last size's call time scaled
                                 by the sizes' ratio) stays within 400 ms */
#define CALIB_NAME "calib.allreduce"
#define CALIB_SMALL_BYTES 128 /* the small all-reduce */
#define CALIB_SMALL_REPS 9    /* its recorded repetitions */

/* One all-reduce of count floats; its span into *s, *e (the transport's, else the call's). */
static int calib_one(struct comm *c, float *buf, size_t count, int64_t *s, int64_t *e)
{
    struct comm_span span = {0, 0};
    const int64_t t0 = clock_now_ns();
    struct comm_work *w = c->allreduce_async(c, buf, count, COMM_F32);
    if (!w || c->wait(c, w, &span))
        return error_wrap("comm calibration all-reduce of %zu bytes", count * sizeof(float));
    const int64_t t1 = clock_now_ns();
    *s = span.end_ns > span.start_ns ? span.start_ns : t0;
    *e = span.end_ns > span.start_ns ? span.end_ns : t1;
    return 0;
}

static void calib_row(struct rank *r, size_t bytes, int64_t s, int64_t e)
{
    probe_row(r->probe, &(struct trace_row){.step = -1,
                                            .epoch = 0,
                                            .phase = PROBE_COMM_ALLREDUCE,
                                            .bucket = -1,
                                            .clock = TRACE_CLOCK_HOST,
                                            .start_ns = s,
                                            .end_ns = e,
                                            .bytes = bytes,
                                            .name = CALIB_NAME,
                                            .kind = TRACE_KIND_RANGE,
                                            .stream = TRACE_LANE_COMM});
}

int rank_calibrate_comm(struct rank *r)
{
    static const size_t sizes[] = {4096, 32768, 262144, 1048576, 4194304}; /* bytes */
    const size_t nsizes = sizeof sizes / sizeof sizes[0];
    if (r->world < 2 || r->o->run.trace == PROBE_OFF || !r->probe)
        return 0;
    struct comm *c = r->dev.comm; /* the bare comm, as the reducer's buckets */
    struct backend *be = r->dev.be;
    float *buf = be->alloc(be, sizes[nsizes - 1]);
    float *flag = be->alloc(be, 2 * sizeof(float));
    if (!buf || !flag) {
        be->free(be, buf);
        be->free(be, flag);
        return error_wrap("comm calibration buffers");
    }
    int64_t s0, e0;
    int rc = calib_one(c, buf, CALIB_SMALL_BYTES / sizeof(float), &s0, &e0); /* warm */
    for (int rep = 0; rep < CALIB_SMALL_REPS && rc == 0; rep++)
        if ((rc = calib_one(c, buf, CALIB_SMALL_BYTES / sizeof(float), &s0, &e0)) == 0)
            calib_row(r, CALIB_SMALL_BYTES, s0, e0);
    /* the sizes' budget starts here: the small one's time (up to ~40 ms where waking a
     * rank costs a tick) must not cost the line its large sizes */
    const int64_t start = clock_now_ns();
    for (size_t k = 0; k < nsizes && rc == 0; k++) {
        const size_t count = sizes[k] / sizeof(float);
        int64_t s, e, call = 0;
        rc = calib_one(c, buf, count, &s, &e); /* warm: the first of a size allocates */
        for (int rep = 0; rep < CALIB_REPS && rc == 0; rep++) {
            const int64_t t0 = clock_now_ns();
            if ((rc = calib_one(c, buf, count, &s, &e)))
                break;
            call = clock_now_ns() - t0;
            calib_row(r, sizes[k], s, e);
        }
        if (rc)
            break;
        if (k + 1 == nsizes)
            break;
        /* the ranks agree on whether to go on: their mean time spent so far and mean
         * time of the last call */
        float mine[2] = {(float)((double)(clock_now_ns() - start) / 1e6),
                         (float)((double)call / 1e6)};
        be->upload(be, flag, mine, sizeof mine);
        if ((rc = comm_allreduce(c, flag, 2, COMM_F32)))
            break;
        be->download(be, mine, flag, sizeof mine);
        const double spent_ms = mine[0] / r->world, call_ms = mine[1] / r->world;
        const double next_ms = (CALIB_REPS + 1) * call_ms * (double)sizes[k + 1] / (double)sizes[k];
        if (spent_ms + next_ms > CALIB_BUDGET_MS)
            break;
    }
    be->free(be, buf);
    be->free(be, flag);
    return rc;
}
