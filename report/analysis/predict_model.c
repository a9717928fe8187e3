/* predict_model.c — the prediction engine of predict.h: one step replayed as a dependency
 * graph, the ring all-reduce cost, its fit to measured collectives, and the straggler term.
 * Pure functions of their arguments (report/FORMULAS.md "Predictions"). */
#include "report/analysis/predict.h"

#include "common/ddp_buckets.h"
#include "common/error.h"
#include "report/input/sort.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* a bucket that starts this close to backward's end starts after it (sums of medians round) */
#define PREDICT_BUSY_EPS_MS 1e-6

double predict_ring_ms(const struct predict_comm *c, int world, double bytes)
{
    if (world <= 1)
        return 0.0;
    const double n = (double)world;
    const double bytes_per_ms = c->bandwidth_gbps * 1e9 / 8.0 / 1e3;
    const double t =
        2.0 * (n - 1.0) / n * bytes / bytes_per_ms + 2.0 * (n - 1.0) * c->latency_us / 1e3;
    const double d = (t < c->floor_ms ? c->floor_ms : t) + c->offset_ms;
    return d > 0.0 ? d : 0.0;
}

void predict_interval_combine(double step_ms, double spread_lo, double spread_hi,
                              double comm_lo_ms, double comm_hi_ms, double skew_ms, double *lo,
                              double *hi)
{
    const double a = step_ms * spread_lo, b = step_ms * spread_hi;
    *lo = step_ms - sqrt(a * a + comm_lo_ms * comm_lo_ms + skew_ms * skew_ms);
    *hi = step_ms + sqrt(b * b + comm_hi_ms * comm_hi_ms + skew_ms * skew_ms);
    if (*lo < 0.0)
        *lo = 0.0;
}

double predict_straggler_ms(const double *sorted, size_t n, int world)
{
    if (world <= 1 || n == 0)
        return 0.0;
    double mean = 0.0, emax = 0.0, prev = 0.0;
    for (size_t i = 0; i < n; i++) {
        const double cdf = pow((double)(i + 1) / (double)n, (double)world);
        emax += sorted[i] * (cdf - prev);
        prev = cdf;
        mean += sorted[i];
    }
    const double d = emax - mean / (double)n;
    return d > 0.0 ? d : 0.0;
}

int predict_fit_ring(const double *bytes, const double *ms, size_t n, int world,
                     struct predict_comm *out)
{
    if (n == 0 || world < 2)
        return -1;
    double sx = 0, sy = 0, sxx = 0, sxy = 0;
    for (size_t i = 0; i < n; i++) {
        sx += bytes[i];
        sy += ms[i];
        sxx += bytes[i] * bytes[i];
        sxy += bytes[i] * ms[i];
    }
    const double dn = (double)n, den = dn * sxx - sx * sx;
    double a = 0.0, b;
    /* distinct sizes: the line; else (or a negative intercept) through the origin */
    if (den > 1e-9 * dn * sxx && (b = (dn * sxy - sx * sy) / den) > 0.0 &&
        (a = (sy - b * sx) / dn) >= 0.0) {
    } else {
        a = 0.0;
        b = sxx > 0.0 ? sxy / sxx : 0.0;
    }
    if (!(b > 0.0))
        return -1;
    const double nn = (double)world;
    /* b ms per byte = 2(N-1)/N / (bytes per ms) */
    const double bytes_per_ms = 2.0 * (nn - 1.0) / nn / b;
    out->bandwidth_gbps = bytes_per_ms * 1e3 * 8.0 / 1e9;
    out->latency_us = a / (2.0 * (nn - 1.0)) * 1e3;
    return 0;
}

/* An all-reduce of ring time t (predict_ring_ms) among world ranks that starts at `start`,
 * before backward ends at bwd_end, where the comm's threads run only at a gradient (the
 * reducer's progress call; ready[0..np): the gradients' times) or after backward: each of
 * the ring's 2(N-1) steps (t / 2(N-1) each) starts at the first of those at or after the
 * previous step's end, and the collective completes at the first after its last step.
 * Returns its duration, at least t. */
static double ring_at_gradients(double t, int world, double start, double bwd_end,
                                const double *ready, int np)
{
    const int steps = 2 * (world - 1);
    const double w = t / steps;
    double now = start;
    for (int k = 0; k <= steps; k++) {
        if (k > 0 && now < bwd_end) { /* the thread runs at the next gradient */
            double next = bwd_end;
            for (int i = 0; i < np; i++)
                if (ready[i] >= now && ready[i] < next)
                    next = ready[i];
            now = next;
        }
        if (k < steps)
            now += w;
    }
    return now - start > t ? now - start : t;
}

/* When each gradient is ready in backward: the gradients' bytes into bytes[0..np) and their
 * ready times into ready[0..np) (layer_end[0..nlayers): each layer's backward end).
 * Backward runs what the layers do not account for (the loss's backward, autograd) first,
 * then the layers from the last to the first; without layers the gradients come in
 * reverse order, spread over backward by their bytes. */
static void replay_ready(const struct predict_model *m, size_t *bytes, double *ready,
                         double *layer_end)
{
    const int np = m->nparams;
    const double bwd_start = m->data_ms + m->forward_ms;
    const double bwd_end = bwd_start + m->backward_ms;
    double layers_bwd = 0.0;
    for (int k = 0; k < m->nlayers; k++)
        layers_bwd += m->layers[k].bwd_ms;
    /* layers longer than the measured backward (medians of parts need not add up): scaled
     * to fit it */
    const double scale = layers_bwd > m->backward_ms && layers_bwd > 0.0
                             ? m->backward_ms / layers_bwd : 1.0;
    double t = bwd_end - layers_bwd * scale;
    for (int k = m->nlayers - 1; k >= 0; k--) {
        t += m->layers[k].bwd_ms * scale;
        layer_end[k] = t;
    }
    if (m->nlayers > 0)
        layer_end[0] = bwd_end; /* the first layer ends backward: exactly, not by a sum */
    double total = 0.0;
    for (int i = 0; i < np; i++)
        total += (double)m->params[i].bytes;
    double acc = 0.0;
    for (int i = np - 1; i >= 0; i--) {
        const struct predict_param *p = &m->params[i];
        bytes[i] = p->bytes;
        acc += (double)p->bytes;
        if (m->nlayers > 0)
            ready[i] = p->layer >= 0 && p->layer < m->nlayers ? layer_end[p->layer] : bwd_end;
        else
            ready[i] = total > 0.0 ? bwd_start + m->backward_ms * acc / total : bwd_end;
    }
}

/* E[max of world draws] - mean of m's per-rank compute samples (0 for one rank or no
 * samples) into *out.  0, or -1 after error_set(). */
static int replay_emax(const struct predict_model *m, int world, double *out)
{
    *out = 0.0;
    if (m->ncompute == 0 || world <= 1)
        return 0;
    double *sorted = malloc(m->ncompute * sizeof *sorted);
    if (!sorted)
        return error_set("predict: out of memory");
    for (size_t i = 0; i < m->ncompute; i++)
        sorted[i] = m->compute_ms[i];
    qsort(sorted, m->ncompute, sizeof *sorted, sort_cmp_double);
    *out = predict_straggler_ms(sorted, m->ncompute, world);
    free(sorted);
    return 0;
}

int predict_straggler_of(const struct predict_model *m, int world, double *out)
{
    *out = 0.0;
    if (world <= 1)
        return 0;
    double s = 0.0, s_run = 0.0;
    if (replay_emax(m, world, &s))
        return -1;
    if (m->wait_world <= 1) { /* no wait measured (a 1-rank run): the model's own */
        *out = s;
        return 0;
    }
    if (world == m->wait_world) {
        *out = m->wait_ms;
        return 0;
    }
    if (replay_emax(m, m->wait_world, &s_run))
        return -1;
    *out = s_run > 0.0 ? m->wait_ms * s / s_run : m->wait_ms;
    return 0;
}

void predict_model_sync_bn_off(const struct predict_model *in, const struct predict_sync_bn *sb,
                               struct predict_model *out)
{
    *out = *in;
    if (sb->steps == 0)
        return;
    out->forward_ms -= sb->fwd_xfer_ms + sb->fwd_wait_ms;
    out->backward_ms -= sb->bwd_xfer_ms + sb->bwd_wait_ms;
    if (out->forward_ms < 0.0)
        out->forward_ms = 0.0;
    if (out->backward_ms < 0.0)
        out->backward_ms = 0.0;
    out->nheld -= in->nheld_sync_bn;
    out->nheld_sync_bn = 0;
    /* the lateness SyncBatchNorm's calls absorbed (the mean rank's wait in them: max - mean
     * of the arrivals) is still there at the end of backward: the gradient all-reduce waits
     * for it instead */
    out->wait_ms += sb->fwd_wait_ms + sb->bwd_wait_ms;
}

int predict_replay(const struct predict_model *m, const struct predict_config *c,
                   struct predict_out *out)
{
    return predict_replay_log(m, c, out, NULL);
}

int predict_replay_log(const struct predict_model *m, const struct predict_config *c,
                       struct predict_out *out, struct predict_bucket_log *log)
{
    *out = (struct predict_out){0};
    if (log)
        *log = (struct predict_bucket_log){0};
    if (c->world < 1)
        return error_set("predict: world size %d (it must be 1 or more)", c->world);
    if (!(c->bucket_cap_mb > 0.0))
        return error_set("predict: bucket cap %g MB (it must be above 0)", c->bucket_cap_mb);
    if (c->world > 1 && !(c->comm.bandwidth_gbps > 0.0))
        return error_set("predict: bandwidth %g Gbit/s (it must be above 0)",
                         c->comm.bandwidth_gbps);
    const int np = m->nparams;
    size_t *bytes = calloc((size_t)np + 1, sizeof *bytes);
    int *bucket_of = calloc((size_t)np + 1, sizeof *bucket_of);
    double *ready = malloc(((size_t)np + 1) * sizeof *ready);
    double *layer_end = malloc(((size_t)m->nlayers + 1) * sizeof *layer_end);
    double *bucket_ready = NULL;
    size_t *bucket_bytes = NULL;
    int rc = 0;
    if (!bytes || !bucket_of || !ready || !layer_end) {
        rc = error_set("predict: out of memory");
        goto done;
    }

    const double bwd_end = m->data_ms + m->forward_ms + m->backward_ms;
    replay_ready(m, bytes, ready, layer_end);

    const int nb = ddp_buckets_assign(bytes, np, DDP_FIRST_BUCKET_BYTES,
                                      ddp_bucket_cap_bytes(c->bucket_cap_mb), bucket_of);
    bucket_ready = calloc((size_t)nb + 1, sizeof *bucket_ready);
    bucket_bytes = calloc((size_t)nb + 1, sizeof *bucket_bytes);
    if (log && c->world > 1)
        log->b = calloc((size_t)nb + 1, sizeof *log->b);
    if (!bucket_ready || !bucket_bytes || (log && c->world > 1 && !log->b)) {
        rc = error_set("predict: out of memory");
        goto done;
    }
    for (int i = 0; i < np; i++) {
        const int b = bucket_of[i];
        bucket_bytes[b] += bytes[i];
        if (ready[i] > bucket_ready[b])
            bucket_ready[b] = ready[i];
    }
    /* one comm stream, buckets in order (the reducer launches them in bucket order) */
    double comm_free = 0.0, comm = 0.0, beside_bytes = 0.0;
    for (int b = 0; b < nb && c->world > 1; b++) {
        const double start = bucket_ready[b] > comm_free ? bucket_ready[b] : comm_free;
        double d = predict_ring_ms(&c->comm, c->world, (double)bucket_bytes[b]);
        const int beside = start < bwd_end - PREDICT_BUSY_EPS_MS;
        if (beside) {
            if (c->comm.grad_progress)
                d = ring_at_gradients(d, c->world, start, bwd_end, ready, np);
            d += c->comm.busy_ms;
        }
        if (beside)
            beside_bytes += (double)bucket_bytes[b];
        if (log)
            log->b[log->n++] = (struct predict_bucket_rec){bucket_bytes[b], d, beside};
        comm_free = start + d;
        comm += d;
    }
    /* the held collectives' time at world N, and at the world of the measurement (inside
     * the measured forward and backward already) */
    double held = 0.0, held_measured = 0.0;
    for (int i = 0; i < m->nheld; i++) {
        held += predict_ring_ms(&c->comm, c->world, (double)m->held_bytes[i]);
        held_measured += predict_ring_ms(&c->comm, m->held_world, (double)m->held_bytes[i]);
    }
    const double exposed = comm_free > bwd_end ? comm_free - bwd_end : 0.0;

    double straggler = 0.0;
    if ((rc = predict_straggler_of(m, c->world, &straggler)))
        goto done;

    /* the comm's CPU beside backward: what the ring moves of those buckets, at the
     * measured CPU per byte; backward (and all after it) takes that much longer */
    const double nn = (double)c->world;
    out->cpu_bwd_ms = c->world > 1 ? c->comm.cpu_ms_per_byte * 2.0 * (nn - 1.0) / nn * beside_bytes
                                   : 0.0;
    out->buckets = nb;
    out->compute_ms = m->data_ms + m->forward_ms + m->backward_ms + m->optimizer_ms +
                      out->cpu_bwd_ms;
    out->comm_ms = comm;
    out->exposed_comm_ms = exposed;
    out->overlap_pct = comm > exposed ? 100.0 * (comm - exposed) / comm : 0.0;
    out->held_ms = held;
    out->straggler_ms = straggler;
    out->step_ms = out->compute_ms + exposed + held - held_measured + straggler;
done:
    if (rc && log) {
        free(log->b);
        *log = (struct predict_bucket_log){0};
    }
    free(bytes);
    free(bucket_of);
    free(ready);
    free(layer_end);
    free(bucket_ready);
    free(bucket_bytes);
    return rc;
}

int predict_fit_busy(const struct predict_model *m, const struct predict_config *c,
                     const double *bytes, double *ms, size_t n, double *busy_ms)
{
    struct predict_config own = *c;
    own.comm.busy_ms = 0.0;
    struct predict_out o;
    struct predict_bucket_log log;
    *busy_ms = 0.0;
    if (predict_replay_log(m, &own, &o, &log))
        return error_wrap("predict: the busy term");
    for (size_t i = 0; i < n; i++) {
        double d0 = predict_ring_ms(&own.comm, own.world, bytes[i]);
        for (int b = 0; b < log.n; b++)
            if (log.b[b].beside && (double)log.b[b].bytes == bytes[i] && log.b[b].ms > d0)
                d0 = log.b[b].ms;
        ms[i] -= d0;
    }
    free(log.b);
    double *tmp = malloc((n ? n : 1) * sizeof *tmp);
    if (!tmp)
        return error_set("predict: out of memory");
    memcpy(tmp, ms, n * sizeof *tmp);
    qsort(tmp, n, sizeof *tmp, sort_cmp_double);
    const double ex = n ? tmp[(n + 1) / 2 - 1] : 0.0;
    free(tmp);
    *busy_ms = ex > 0 ? ex : 0.0;
    return 0;
}
