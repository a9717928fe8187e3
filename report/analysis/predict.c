/* predict.c — a run's model for the engine (predict_model.c) built from its trace rows and
 * meta.csv, the comm calibrated from its own collectives, one anchored prediction, and
 * the report's what-if figures (predict.h).  `ddpprof predict` is report/predict_cli.c,
 * predict.csv and the what-if lines report/output/predict_view.c.  Definitions:
 * report/FORMULAS.md "Predictions". */
#include "report/analysis/predict.h"

#include "common/error.h"
#include "common/vec.h"
#include "report/analysis/analysis.h"
#include "report/analysis/layers.h"
#include "report/input/run.h"
#include "report/input/sort.h"

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* TCP/IPv4 payload per byte on an Ethernet link of MTU 1500: 1448 payload bytes (TCP
 * timestamps on) of a 1514-byte frame, less the reverse ACKs (66 bytes for every second
 * segment, on a link that a ring all-reduce loads both ways): 1448 / (1514 + 33) */
#define PREDICT_TCP_EFFICIENCY (1448.0 / 1547.0)

/* the name of the calibration all-reduces' rows (probes/TRACE.md: step -1, phase
 * comm.allreduce, written at DDP setup) */
#define PREDICT_CALIB_NAME "calib.allreduce"
/* The setup's near-empty all-reduce (trainer/train_calib.c): at most this many bytes, at
 * least PREDICT_SMALL_MIN of them; sizes whose median time is at least PREDICT_FLOOR_CLEAR
 * times its median clear the floor (source_calibrate) */
#define PREDICT_SMALL_BYTES 1024
#define PREDICT_SMALL_MIN 5
#define PREDICT_FLOOR_CLEAR 1.5


static void source_free(struct predict_source *s)
{
    free(s->m.layers);
    free(s->m.params);
    free(s->m.held_bytes);
    free(s->m.compute_ms);
    if (s->layer_type)
        for (int k = 0; k < s->m.nlayers; k++)
            free(s->layer_type[k]);
    free(s->layer_type);
    memset(s, 0, sizeof *s);
}

/* the median of v[0..n) (sorts it; the lower middle for even n, as analysis_percentile's
 * nearest rank at 50); 0 for n == 0 */
static double median(double *v, size_t n)
{
    if (n == 0)
        return 0.0;
    qsort(v, n, sizeof *v, sort_cmp_double);
    return v[(n + 1) / 2 - 1];
}

/* the nearest-rank p-th percentile of v[0..n) (sorts it; analysis_percentile's rule: the
 * value at 1-based rank ceil(p n / 100)); 0 for n == 0 */
static double percentile(double *v, size_t n, int p)
{
    if (n == 0)
        return 0.0;
    qsort(v, n, sizeof *v, sort_cmp_double);
    size_t rank = ((size_t)p * n + 99) / 100;
    return v[rank < 1 ? 0 : rank - 1];
}

/* rank_stat's p50 of a phase (ms), -1 when absent */
static double phase_p50(const struct runset *rs, const struct rank_stat *rk, const char *name)
{
    for (int i = 0; i < rk->nphases; i++)
        if (strcmp(strpool_get(&rs->labels, rk->phases[i].phase), name) == 0)
            return (double)rk->phases[i].p50_ns / 1e6;
    return -1.0;
}

/* Is row a selected range of a step that counts (after the warm-up)? */
static int row_counts(const struct run_stat *st, const struct run_row *row, uint32_t range)
{
    return row->kind == range && row->step >= 1 && row->step > st->warmup.last_step;
}

/* A growable list of doubles */
struct dlist {
    double *v;
    size_t n, cap;
};

static int dlist_add(struct dlist *l, double x)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 64;
        double *v = realloc(l->v, cap * sizeof *v);
        if (!v)
            return error_set("predict: out of memory");
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = x;
    return 0;
}

/* The layers (meta.csv layer.K.*, forward order) and their median forward and backward
 * per step after the warm-up: report/analysis/layers.c's per rank (device rows where the rank has
 * them, else host), the mean over the ranks that have them. */
static int source_layers(const struct runset *rs, const struct run_stat *st, int run,
                         struct predict_source *s)
{
    int ranks = 0;
    for (int q = 0; q < s->run->nranks; q++) {
        struct layer_times lt = {0};
        if (layers_rank_times(rs, st, run, q, &lt))
            return -1;
        if (lt.n > 0 && !s->m.layers) {
            s->m.layers = calloc((size_t)lt.n, sizeof *s->m.layers);
            s->layer_type = calloc((size_t)lt.n, sizeof *s->layer_type);
            if (!s->m.layers || !s->layer_type) {
                layers_times_free(&lt);
                return error_set("predict: out of memory");
            }
            s->m.nlayers = lt.n;
            for (int k = 0; k < lt.n; k++) {
                s->m.layers[k].name = lt.v[k].name; /* meta.csv's: live as the runset */
                if (lt.v[k].type && !(s->layer_type[k] = strdup(lt.v[k].type))) {
                    layers_times_free(&lt);
                    return error_set("predict: out of memory");
                }
            }
        }
        int any = 0;
        for (int k = 0; k < lt.n && k < s->m.nlayers; k++) {
            if (lt.v[k].med_ns[0] >= 0)
                s->m.layers[k].fwd_ms += (double)lt.v[k].med_ns[0] / 1e6;
            if (lt.v[k].med_ns[1] >= 0)
                s->m.layers[k].bwd_ms += (double)lt.v[k].med_ns[1] / 1e6;
            any |= lt.v[k].med_ns[0] >= 0 || lt.v[k].med_ns[1] >= 0;
        }
        ranks += any;
        layers_times_free(&lt);
    }
    for (int k = 0; k < s->m.nlayers && ranks > 0; k++) {
        s->m.layers[k].fwd_ms /= ranks;
        s->m.layers[k].bwd_ms /= ranks;
    }
    s->layered = ranks > 0;
    return 0;
}

/* The parameters (meta.csv param.I.*, model order), each in the layer whose name is the
 * longest prefix of its name followed by '.'; without param keys, one pseudo-parameter per
 * measured bucket (its bytes; the cap can then only merge, not re-split, and gradients
 * become ready spread over backward). */
static int source_params(struct predict_source *s)
{
    const struct run *r = s->run;
    const int np = meta_run_of(&r->meta.param_name, 0);
    int64_t nb = 0;
    if (np > 0) {
        s->m.params = calloc((size_t)np, sizeof *s->m.params);
        if (!s->m.params)
            return error_set("predict: out of memory");
        for (int i = 0; i < np; i++) {
            const char *name = meta_text_at(&r->meta.param_name, i);
            const struct meta_value *pb = meta_at(&r->meta.param_bytes, i);
            const int64_t bytes = pb ? pb->i : -1;
            if (bytes < 0)
                return error_set("%s/meta.csv: param.%d.bytes is missing or not a byte count "
                                 "(the run's meta.csv is damaged: re-run it)", r->dir, i);
            s->m.params[i].bytes = (size_t)bytes;
            s->m.params[i].layer = -1;
            size_t best = 0;
            for (int k = 0; k < s->m.nlayers; k++) {
                if (!s->m.layers[k].name)
                    continue; /* meta.csv's layers past its layer.K.name rows (damaged) */
                size_t len = strlen(s->m.layers[k].name);
                if (len > best && strncmp(name, s->m.layers[k].name, len) == 0 &&
                    name[len] == '.') {
                    best = len;
                    s->m.params[i].layer = k;
                }
            }
        }
        s->m.nparams = (int)np;
        s->param_keys = 1;
        return 0;
    }
    nb = r->meta.buckets.s && r->meta.buckets.i > 0 ? r->meta.buckets.i : 0;
    /* each bucket has its bucket.N.bytes key: more buckets than meta.csv has rows is no
     * run's (and memory follows the rows, not the number) */
    if ((size_t)nb > r->meta.rows)
        return error_set("%s/meta.csv: buckets is %lld but the file has %zu rows (each bucket "
                         "has a bucket.N.bytes row): the run's meta.csv is damaged",
                         r->dir, (long long)nb, r->meta.rows);
    s->m.params = calloc((size_t)nb + 1, sizeof *s->m.params);
    if (!s->m.params)
        return error_set("predict: out of memory");
    for (int b = 0; b < nb; b++) {
        const struct meta_value *bb = meta_at(&r->meta.bucket_bytes, b);
        const int64_t bytes = bb ? bb->i : -1;
        if (bytes < 0)
            return error_set("%s/meta.csv: buckets is %lld but bucket.%d.bytes is missing",
                             r->dir, (long long)nb, b);
        /* bucket 0 holds the last parameters */
        s->m.params[nb - 1 - b] = (struct predict_param){(size_t)bytes, -1};
    }
    s->m.nparams = (int)nb;
    s->m.nlayers = 0; /* pseudo-parameters belong to no layer: spread by bytes */
    return 0;
}

/* A row of a (step, bucket) cell (key: step << 32 | bucket), or a backward row's end
 * (key: its step, start: its end_ns), for source_calibrate. */
struct cell_row {
    int64_t key;
    double ms;
    int64_t start, bytes;
};

/* Per (collective, rank): sizes and durations, matched across ranks by order. */
struct coll_rows {
    struct dlist bytes, ms;
};

/* The labels source_calibrate looks for (STRPOOL_NONE: absent from the runset). */
struct calib_ids {
    uint32_t range, ar, car, bwd, calib;
};

/* The buckets' all-reduces: per (step, bucket) the shortest duration over ranks and the
 * latest start.  One that started (on every rank) before the last rank's backward ended,
 * the last bucket aside, ran beside compute: it goes to busy_*, for the busy term, and
 * stays out of the line (x*). */
static int calib_buckets(const struct predict_source *s, const struct calib_ids *id,
                         struct dlist *xb, struct dlist *xm, struct dlist *busy_b,
                         struct dlist *busy_m)
{
    const struct run *r = s->run;
    const int64_t nb = r->meta.buckets.s ? r->meta.buckets.i : 0;
    int64_t maxstep = 0;
    for (int q = 0; q < r->nranks; q++)
        if (r->ranks[q].last_step > maxstep)
            maxstep = r->ranks[q].last_step;
    if (!(nb > 0 && maxstep > 0 && id->ar != STRPOOL_NONE && id->range != STRPOOL_NONE))
        return 0;
    /* the cells are the (step, bucket) pairs that have rows, sorted: memory follows the
     * rows, not the highest step or bucket number they name */
    struct cell_row *cells = NULL, *bends = NULL;
    size_t ncells = 0, cap_cells = 0, nbends = 0, cap_bends = 0;
    int rc = 0;
    for (int q = 0; q < r->nranks && rc == 0; q++) {
        const struct rank_trace *t = &r->ranks[q];
        int dev = 0;
        for (size_t i = 0; i < t->n; i++)
            if (t->rows[i].phase == id->ar && t->rows[i].clock == TRACE_CLOCK_DEVICE)
                dev = 1;
        const enum trace_clock clk = dev ? TRACE_CLOCK_DEVICE : TRACE_CLOCK_HOST;
        for (size_t i = 0; i < t->n && rc == 0; i++) {
            const struct run_row *row = &t->rows[i];
            if (row->phase == id->bwd && id->bwd != STRPOOL_NONE && row->clock == clk &&
                row->step >= 0 && row->step <= maxstep && row->end_ns > 0) {
                if (VEC_RESERVE(bends, cap_bends, nbends + 1))
                    rc = error_set("predict: out of memory");
                else
                    bends[nbends++] = (struct cell_row){row->step, 0, row->end_ns, 0};
            }
            if (row->phase != id->ar || !row_counts(s->st, row, id->range) || row->bucket < 0 ||
                row->bucket >= nb || row->step > maxstep || row->bytes <= 0 ||
                row->clock != clk)
                continue;
            if (rc == 0 && VEC_RESERVE(cells, cap_cells, ncells + 1))
                rc = error_set("predict: out of memory");
            if (rc == 0)
                cells[ncells++] = (struct cell_row){
                    (int64_t)row->step << 32 | (int64_t)row->bucket,
                    (double)(row->end_ns - row->start_ns) / 1e6, row->start_ns, row->bytes};
        }
    }
    /* stable: a cell's rows stay in rank and file order (its bytes are the last row's) */
    if (rc == 0 && (sort_by_i64(cells, ncells, sizeof *cells, offsetof(struct cell_row, key)) ||
                    sort_by_i64(bends, nbends, sizeof *bends, offsetof(struct cell_row, key))))
        rc = error_wrap("predict");
    size_t b = 0;
    for (size_t i = 0; i < ncells && rc == 0;) {
        const int64_t step = cells[i].key >> 32, bucket = cells[i].key & 0xffffffff;
        double best = cells[i].ms;
        int64_t start = cells[i].start, bytes = cells[i].bytes;
        size_t j = i + 1;
        for (; j < ncells && cells[j].key == cells[i].key; j++) {
            best = cells[j].ms < best ? cells[j].ms : best;
            start = cells[j].start > start ? cells[j].start : start;
            bytes = cells[j].bytes;
        }
        i = j;
        /* the step's backward end (0: no backward row) */
        while (b < nbends && bends[b].key < step)
            b++;
        int64_t be = 0;
        for (size_t k = b; k < nbends && bends[k].key == step; k++)
            be = bends[k].start > be ? bends[k].start : be;
        /* the last bucket holds the first layer's gradients: it is ready when backward
         * ends (inside the backward range, by the hook), never beside it */
        const int during = be > 0 && start < be && bucket != nb - 1;
        rc = dlist_add(during ? busy_b : xb, (double)bytes);
        if (rc == 0)
            rc = dlist_add(during ? busy_m : xm, best);
    }
    free(cells);
    free(bends);
    return rc;
}

/* The setup's calibration rows: the k-th of every rank is one collective, its time the
 * shortest over ranks (a collective the ranks disagree on is left out). */
static int calib_setup_rows(const struct predict_source *s, const struct calib_ids *id,
                            struct dlist *xb, struct dlist *xm)
{
    const struct run *r = s->run;
    if (id->calib == STRPOOL_NONE || id->car == STRPOOL_NONE)
        return 0;
    int rc = 0;
    struct coll_rows *cr = calloc((size_t)r->nranks, sizeof *cr);
    if (!cr)
        rc = error_set("predict: out of memory");
    size_t least = SIZE_MAX;
    for (int q = 0; q < r->nranks && rc == 0; q++) {
        const struct rank_trace *t = &r->ranks[q];
        for (size_t i = 0; i < t->n && rc == 0; i++) {
            const struct run_row *row = &t->rows[i];
            if (row->phase == id->car && row->name == id->calib && row->step < 0 &&
                row->clock == TRACE_CLOCK_HOST && row->bytes > 0) {
                rc = dlist_add(&cr[q].bytes, (double)row->bytes);
                if (rc == 0)
                    rc = dlist_add(&cr[q].ms, (double)(row->end_ns - row->start_ns) / 1e6);
            }
        }
        if (cr && cr[q].bytes.n < least)
            least = cr[q].bytes.n;
    }
    for (size_t k = 0; rc == 0 && least != SIZE_MAX && k < least; k++) {
        double b = cr[0].bytes.v[k], ms = cr[0].ms.v[k];
        int same = 1;
        for (int q = 1; q < r->nranks; q++) {
            same &= cr[q].bytes.v[k] == b;
            if (cr[q].ms.v[k] < ms)
                ms = cr[q].ms.v[k];
        }
        if (!same)
            continue; /* ranks disagree on the order: leave the row out */
        rc = dlist_add(xb, b);
        if (rc == 0)
            rc = dlist_add(xm, ms);
    }
    for (int q = 0; cr && q < r->nranks; q++) {
        free(cr[q].bytes.v);
        free(cr[q].ms.v);
    }
    free(cr);
    return rc;
}

/* Per distinct size of xb (in the order first seen), the median of its times xm: into fb,
 * fm. */
static int calib_medians(const struct dlist *xb, const struct dlist *xm, struct dlist *fb,
                         struct dlist *fm)
{
    if (xb->n == 0)
        return 0;
    int rc = 0;
    double *tmp = malloc(xb->n * sizeof *tmp);
    if (!tmp)
        rc = error_set("predict: out of memory");
    for (size_t i = 0; rc == 0 && i < xb->n; i++) {
        int seen = 0;
        for (size_t j = 0; j < fb->n; j++)
            seen |= fb->v[j] == xb->v[i];
        if (seen)
            continue;
        size_t m = 0;
        for (size_t j = i; j < xb->n; j++)
            if (xb->v[j] == xb->v[i])
                tmp[m++] = xm->v[j];
        rc = dlist_add(fb, xb->v[i]);
        if (rc == 0)
            rc = dlist_add(fm, median(tmp, m));
    }
    free(tmp);
    return rc;
}

/* The floor: the median of the near-empty all-reduces (the smallest size up to
 * PREDICT_SMALL_BYTES, PREDICT_SMALL_MIN samples or more) into *floor_ms (0: none) and
 * their count into *nsmall; the sizes fb, fm are then cut to those that clear it (their
 * time is the wire's, not waking's) where two or more do, else to the sizes above the
 * near-empty one. */
static void calib_floor(const struct dlist *xb, struct dlist *fb, struct dlist *fm,
                        double *floor_ms, size_t *nsmall)
{
    double small = 0;
    *floor_ms = 0;
    *nsmall = 0;
    for (size_t i = 0; i < fb->n; i++)
        if (fb->v[i] <= PREDICT_SMALL_BYTES && (small == 0 || fb->v[i] < small))
            small = fb->v[i];
    for (size_t i = 0; small > 0 && i < xb->n; i++)
        *nsmall += xb->v[i] == small;
    if (*nsmall < PREDICT_SMALL_MIN)
        return;
    for (size_t i = 0; i < fb->n; i++)
        if (fb->v[i] == small)
            *floor_ms = fm->v[i];
    size_t clear = 0, big = 0;
    for (size_t i = 0; i < fb->n; i++) {
        clear += fm->v[i] >= PREDICT_FLOOR_CLEAR * *floor_ms;
        big += fb->v[i] > small;
    }
    if (clear >= 2 || big >= 1) {
        size_t k = 0;
        for (size_t i = 0; i < fb->n; i++)
            if (clear >= 2 ? fm->v[i] >= PREDICT_FLOOR_CLEAR * *floor_ms : fb->v[i] > small) {
                fb->v[k] = fb->v[i];
                fm->v[k++] = fm->v[i];
            }
        fb->n = fm->n = k;
    }
}

/* The comm fit's residuals (report/FORMULAS.md "The 80 % interval"), in ms: per distinct
 * size, the median time of the run's all-reduces after backward and the setup's (xb, xm)
 * less the fitted comm's time for that size, and of those beside backward (busy_b, and
 * busy_m: their excess over that time) less that time plus busy; their nearest-rank p10 and
 * p90 into s->comm's resid_lo_ms = min(0, p10), resid_hi_ms = max(0, p90). */
static int calib_residuals(struct predict_source *s, const struct dlist *xb,
                           const struct dlist *xm, const struct dlist *busy_b,
                           const struct dlist *busy_m)
{
    struct dlist fb = {0}, fm = {0}, res = {0};
    int rc = calib_medians(xb, xm, &fb, &fm);
    for (size_t i = 0; rc == 0 && i < fb.n; i++) {
        const double t = predict_ring_ms(&s->comm, s->world, fb.v[i]);
        rc = dlist_add(&res, fm.v[i] - t);
    }
    fb.n = fm.n = 0;
    if (rc == 0)
        rc = calib_medians(busy_b, busy_m, &fb, &fm);
    for (size_t i = 0; rc == 0 && i < fb.n; i++) {
        rc = dlist_add(&res, fm.v[i] - s->comm.busy_ms);
    }
    if (rc == 0 && res.n > 0) {
        const double lo = percentile(res.v, res.n, 10), hi = percentile(res.v, res.n, 90);
        s->comm.resid_lo_ms = lo < 0 ? lo : 0.0;
        s->comm.resid_hi_ms = hi > 0 ? hi : 0.0;
        s->comm.resid_sizes = res.n;
    }
    free(fb.v);
    free(fm.v);
    free(res.v);
    return rc;
}

/* The comm's ring parameters from the run's own all-reduces: the buckets' (per step and
 * bucket, the shortest duration over ranks: the transfer, without the wait for a late rank)
 * and the setup's calibration rows (matched across ranks by their order); per distinct
 * size the median; least squares over the sizes (predict_fit_ring). */
static int source_calibrate(const struct runset *rs, struct predict_source *s)
{
    const struct run *r = s->run;
    if (s->world < 2 || r->nranks < 1)
        return 0;
    const struct calib_ids id = {strpool_find(&rs->labels, "range"),
                                 strpool_find(&rs->labels, "allreduce"),
                                 strpool_find(&rs->labels, "comm.allreduce"),
                                 strpool_find(&rs->labels, "backward"),
                                 strpool_find(&rs->names, PREDICT_CALIB_NAME)};
    struct dlist xb = {0}, xm = {0}, busy_b = {0}, busy_m = {0}, fb = {0}, fm = {0};
    int rc = calib_buckets(s, &id, &xb, &xm, &busy_b, &busy_m);
    if (rc == 0)
        rc = calib_setup_rows(s, &id, &xb, &xm);
    if (rc == 0)
        rc = calib_medians(&xb, &xm, &fb, &fm);
    double floor_ms = 0;
    size_t nsmall = 0;
    if (rc == 0)
        calib_floor(&xb, &fb, &fm, &floor_ms, &nsmall);
    if (rc == 0 && fb.n > 0 && predict_fit_ring(fb.v, fm.v, fb.n, s->world, &s->comm) == 0) {
        s->comm.floor_ms = floor_ms;
        s->comm.grad_progress = meta_is(&r->meta.comm_progress, "gradient");
        s->cal_small = floor_ms > 0 ? nsmall : 0;
        s->calibrated = 1;
        s->cal_sizes = fb.n;
        s->cal_samples = xb.n;
        if (busy_b.n > 0) {
            struct predict_config own = {s->world, s->cap_mb, s->comm};
            rc = predict_fit_busy(&s->m, &own, busy_b.v, busy_m.v, busy_b.n, &s->comm.busy_ms);
            s->cal_busy = busy_b.n;
        }
        if (rc == 0)
            rc = calib_residuals(s, &xb, &xm, &busy_b, &busy_m);
    }
    free(busy_b.v);
    free(busy_m.v);
    free(xb.v);
    free(xm.v);
    free(fb.v);
    free(fm.v);
    return rc;
}

/* The held collectives of one counted step (rank 0's comm.* rows other than the
 * calibration's) and, per rank and counted step, forward + backward for the straggler term
 * (less the step's mean over ranks where there are several ranks, less the median step's
 * where there is one). */
static int source_steps(const struct runset *rs, struct predict_source *s)
{
    const struct run *r = s->run;
    const uint32_t range = strpool_find(&rs->labels, "range");
    const uint32_t fwd = strpool_find(&rs->labels, "forward");
    const uint32_t bwd = strpool_find(&rs->labels, "backward");
    const uint32_t calib = strpool_find(&rs->names, PREDICT_CALIB_NAME);
    if (range == STRPOOL_NONE || r->nranks < 1)
        return 0;
    int64_t maxstep = 0;
    for (int q = 0; q < r->nranks; q++)
        if (r->ranks[q].last_step > maxstep)
            maxstep = r->ranks[q].last_step;
    /* held: the first counted step of rank 0 */
    const struct rank_trace *t0 = &r->ranks[0];
    int64_t held_step = -1;
    size_t nheld = 0;
    for (size_t pass = 0; pass < 2; pass++) {
        for (size_t i = 0; i < t0->n; i++) {
            const struct run_row *row = &t0->rows[i];
            const char *ph = strpool_get(&rs->labels, row->phase);
            if (!row_counts(s->st, row, range) || row->clock != TRACE_CLOCK_HOST ||
                strncmp(ph, "comm.", 5) != 0 || row->name == calib || row->bytes < 0)
                continue;
            if (held_step < 0)
                held_step = row->step;
            if (row->step != held_step)
                continue;
            if (pass == 1)
                s->m.held_bytes[s->m.nheld++] = (size_t)row->bytes;
            else
                nheld++;
        }
        if (pass == 0 && !(s->m.held_bytes = calloc(nheld + 1, sizeof *s->m.held_bytes)))
            return error_set("predict: out of memory");
    }
    s->m.held_world = s->world;
    if (maxstep < 1 || fwd == STRPOOL_NONE || bwd == STRPOOL_NONE)
        return 0;
    /* per (step, rank) with rows, sorted: memory follows the rows, not the step numbers */
    const size_t nr = (size_t)r->nranks;
    struct rank_ms {
        int64_t key; /* step * ranks + rank */
        double ms;
    } *v = NULL;
    size_t nv = 0, cap = 0;
    for (size_t q = 0; q < nr; q++) {
        const struct rank_trace *t = &r->ranks[q];
        for (size_t i = 0; i < t->n; i++) {
            const struct run_row *row = &t->rows[i];
            if ((row->phase == fwd || row->phase == bwd) && row_counts(s->st, row, range) &&
                row->clock == TRACE_CLOCK_HOST && row->step <= maxstep) {
                if (VEC_RESERVE(v, cap, nv + 1)) {
                    free(v);
                    return error_set("predict: out of memory");
                }
                v[nv++] = (struct rank_ms){(int64_t)row->step * (int64_t)nr + (int64_t)q,
                                           (double)(row->end_ns - row->start_ns) / 1e6};
            }
        }
    }
    double *c = calloc(nr + 1, sizeof *c); /* one step's sums per rank */
    s->m.compute_ms = malloc((nv + 1) * sizeof *s->m.compute_ms);
    if (!c || !s->m.compute_ms || sort_by_i64(v, nv, sizeof *v, offsetof(struct rank_ms, key))) {
        free(v);
        free(c);
        return error_set("predict: out of memory");
    }
    double *tmp = s->m.compute_ms;
    size_t n = 0;
    for (size_t i = 0; i < nv;) {
        const int64_t step = v[i].key / (int64_t)nr;
        memset(c, 0, nr * sizeof *c);
        for (; i < nv && v[i].key / (int64_t)nr == step; i++)
            c[v[i].key % (int64_t)nr] += v[i].ms;
        double sum = 0;
        int all = 1;
        for (size_t q = 0; q < nr; q++) {
            sum += c[q];
            all &= c[q] > 0;
        }
        if (!all)
            continue;
        for (size_t q = 0; q < nr; q++)
            tmp[n++] = nr > 1 ? c[q] - sum / (double)nr : c[q];
    }
    free(v);
    s->m.ncompute = n;
    if (nr == 1 && n > 0) { /* one rank: its spread around the median step */
        double *cp = malloc(n * sizeof *cp);
        if (!cp) {
            free(c);
            return error_set("predict: out of memory");
        }
        memcpy(cp, tmp, n * sizeof *cp);
        const double md = median(cp, n);
        free(cp);
        for (size_t i = 0; i < n; i++)
            tmp[i] -= md;
    }
    free(c);
    return 0;
}

/* One SyncBatchNorm row: its call (step, k-th such row of the rank in the step), rank,
 * time and whether backward issued it. */
struct sbn_row {
    int64_t key; /* ((step * calls) + k) * ranks + rank */
    int64_t step;
    int in_bwd;
    double ms;
};

/* Is the host row of rank q's step `step` starting at start_ns inside its forward (1) or
 * backward (2) range?  0: neither. */
static int sbn_where(const int64_t *fwd, const int64_t *bwd, int64_t step, int64_t start_ns)
{
    if (fwd[2 * step] >= 0 && start_ns >= fwd[2 * step] && start_ns <= fwd[2 * step + 1])
        return 1;
    if (bwd[2 * step] >= 0 && start_ns >= bwd[2 * step] && start_ns <= bwd[2 * step + 1])
        return 2;
    return 0;
}

/* What source_sync_bn's steps share: the run's labels and its per-step ranges. */
struct sbn_ctx {
    const struct runset *rs;
    struct predict_source *s;
    uint32_t range, fwd, bwd, calib;
    int64_t maxstep;
    size_t ns, nr; /* steps (maxstep + 1) and ranks */
    int64_t *fr, *br; /* per step: the rank's forward and backward range, -1 none */
    int *kc;          /* per step: SyncBatchNorm rows seen so far */
};

/* x->fr and x->br: rank t's counted host forward and backward ranges by step. */
static void sbn_ranges(struct sbn_ctx *x, const struct rank_trace *t)
{
    for (size_t i = 0; i < 2 * x->ns; i++)
        x->fr[i] = x->br[i] = -1;
    for (size_t i = 0; i < t->n; i++) {
        const struct run_row *row = &t->rows[i];
        if ((row->phase == x->fwd || row->phase == x->bwd) &&
            row_counts(x->s->st, row, x->range) && row->clock == TRACE_CLOCK_HOST &&
            row->step <= x->maxstep) {
            int64_t *r = row->phase == x->fwd ? x->fr : x->br;
            r[2 * row->step] = row->start_ns;
            r[2 * row->step + 1] = row->end_ns;
        }
    }
}

/* Is row one of the training thread's comm.* rows (the calibration's aside)? */
static int sbn_comm_row(const struct sbn_ctx *x, const struct run_row *row)
{
    return row_counts(x->s->st, row, x->range) && row->clock == TRACE_CLOCK_HOST &&
           strncmp(strpool_get(&x->rs->labels, row->phase), "comm.", 5) == 0 &&
           row->name != x->calib;
}

/* Every rank's SyncBatchNorm rows into *v (rank by rank, keys set by sbn_keys), the most
 * such rows of one step into *kmax.  0, or -1 after error_set(). */
static int sbn_collect(struct sbn_ctx *x, struct sbn_row **v, size_t *nv, int *kmax)
{
    size_t cap = 0;
    for (size_t q = 0; q < x->nr; q++) {
        const struct rank_trace *t = &x->s->run->ranks[q];
        sbn_ranges(x, t);
        memset(x->kc, 0, x->ns * sizeof *x->kc);
        for (size_t i = 0; i < t->n; i++) {
            const struct run_row *row = &t->rows[i];
            if (!sbn_comm_row(x, row) || row->step > x->maxstep)
                continue;
            const int where = sbn_where(x->fr, x->br, row->step, row->start_ns);
            if (!where)
                continue;
            if (VEC_RESERVE(*v, cap, *nv + 1))
                return error_set("predict: out of memory");
            const int k = x->kc[row->step]++;
            if (k + 1 > *kmax)
                *kmax = k + 1;
            /* the key is set by sbn_keys, once the most calls of a step (kmax) is known */
            (*v)[(*nv)++] = (struct sbn_row){.key = -1 - (int64_t)q, .step = row->step,
                                             .in_bwd = where == 2,
                                             .ms = (double)(row->end_ns - row->start_ns) / 1e6};
        }
    }
    return 0;
}

/* The keys of v[0..nv) (rank by rank, as sbn_collect leaves them): rows in call order. */
static void sbn_keys(struct sbn_ctx *x, struct sbn_row *v, size_t nv, int kmax)
{
    size_t i = 0;
    for (size_t q = 0; q < x->nr; q++) {
        memset(x->kc, 0, x->ns * sizeof *x->kc);
        for (; i < nv && v[i].key == -1 - (int64_t)q; i++) {
            const int k = x->kc[v[i].step]++;
            v[i].key = (v[i].step * kmax + k) * (int64_t)x->nr + (int64_t)q;
        }
    }
}

/* s->sbn from the calls v[0..nv) sorted by key: per call every rank's row, transfer = the
 * least, wait = the mean of the rest; per step the sums, kept where every call of the step
 * is on every rank; their medians over the steps.  0, or -1 after error_set(). */
static int sbn_medians(struct predict_source *s, const struct sbn_row *v, size_t nv, size_t nr)
{
    struct dlist d[4] = {{0}}; /* per step: forward transfer, wait; backward transfer, wait */
    double sum[4] = {0};
    int64_t step = -1;
    int whole = 0, rc = 0;
    size_t calls = 0, step_calls = 0;
    for (size_t i = 0; i <= nv && rc == 0;) {
        const int64_t call = i < nv ? v[i].key / (int64_t)nr : -1;
        const int64_t st = i < nv ? v[i].step : -1;
        if (st != step) { /* close the step */
            if (step >= 0 && whole && step_calls > 0) {
                for (int j = 0; j < 4 && rc == 0; j++)
                    rc = dlist_add(&d[j], sum[j]);
                calls = step_calls;
            }
            if (i == nv)
                break;
            step = st;
            whole = 1;
            step_calls = 0;
            memset(sum, 0, sizeof sum);
        }
        size_t j = i, n = 0;
        double least = INFINITY, total = 0;
        for (; j < nv && v[j].key / (int64_t)nr == call; j++, n++) {
            least = v[j].ms < least ? v[j].ms : least;
            total += v[j].ms;
        }
        if (n != nr) {
            whole = 0;
        } else {
            const int b = v[i].in_bwd ? 2 : 0;
            sum[b] += least;
            sum[b + 1] += (total - least * (double)n) / (double)n;
            step_calls++;
        }
        i = j;
    }
    if (rc == 0 && d[0].n > 0) {
        s->sbn.steps = d[0].n;
        s->sbn.calls = calls;
        s->sbn.fwd_xfer_ms = median(d[0].v, d[0].n);
        s->sbn.fwd_wait_ms = median(d[1].v, d[1].n);
        s->sbn.bwd_xfer_ms = median(d[2].v, d[2].n);
        s->sbn.bwd_wait_ms = median(d[3].v, d[3].n);
    }
    for (int j = 0; j < 4; j++)
        free(d[j].v);
    return rc;
}

/* The held collectives of s->m (rank 0's of its first counted step with any) reordered
 * with SyncBatchNorm's last.  0, or -1 after error_set(). */
static int sbn_order_held(struct sbn_ctx *x)
{
    struct predict_source *s = x->s;
    const struct rank_trace *t = &s->run->ranks[0];
    sbn_ranges(x, t);
    size_t *h = malloc(((size_t)s->m.nheld + 1) * sizeof *h);
    if (!h)
        return error_set("predict: out of memory");
    int64_t held_step = -1;
    int nh = 0, nsb = 0;
    for (int pass = 0; pass < 2; pass++)
        for (size_t i = 0; i < t->n && nh < s->m.nheld; i++) {
            const struct run_row *row = &t->rows[i];
            if (!sbn_comm_row(x, row) || row->bytes < 0)
                continue;
            if (held_step < 0)
                held_step = row->step;
            if (row->step != held_step)
                continue;
            const int is_sbn = row->step <= x->maxstep &&
                               sbn_where(x->fr, x->br, row->step, row->start_ns) != 0;
            if (is_sbn == pass) {
                h[nh++] = (size_t)row->bytes;
                nsb += is_sbn;
            }
        }
    if (nh == s->m.nheld) {
        memcpy(s->m.held_bytes, h, (size_t)nh * sizeof *h);
        s->m.nheld_sync_bn = nsb;
    }
    free(h);
    return 0;
}

/* SyncBatchNorm's collectives (meta.csv sync_bn 1, 2 ranks or more): the training
 * thread's comm.* rows (the calibration's aside) that start inside the same rank's forward
 * or backward of a counted step -- SyncBatchNorm's all-gathers and all-reduces; the loss's
 * and AMP's all-reduces are in the optimizer -- grouped into calls (the k-th such row of
 * each rank in a step), into s->sbn (predict.h).  The held collectives of s->m are
 * reordered so that SyncBatchNorm's come last (s->m.nheld_sync_bn of them). */
static int source_sync_bn(const struct runset *rs, struct predict_source *s)
{
    const struct run *r = s->run;
    struct sbn_ctx x = {.rs = rs,
                        .s = s,
                        .range = strpool_find(&rs->labels, "range"),
                        .fwd = strpool_find(&rs->labels, "forward"),
                        .bwd = strpool_find(&rs->labels, "backward"),
                        .calib = strpool_find(&rs->names, PREDICT_CALIB_NAME)};
    if (!s->sync_bn || s->world < 2 || r->nranks < 2 || x.range == STRPOOL_NONE ||
        x.fwd == STRPOOL_NONE || x.bwd == STRPOOL_NONE)
        return 0;
    for (int q = 0; q < r->nranks; q++)
        if (r->ranks[q].last_step > x.maxstep)
            x.maxstep = r->ranks[q].last_step;
    if (x.maxstep < 1)
        return 0;
    x.ns = (size_t)x.maxstep + 1;
    x.nr = (size_t)r->nranks;
    x.fr = malloc(2 * x.ns * sizeof *x.fr);
    x.br = malloc(2 * x.ns * sizeof *x.br);
    x.kc = malloc(x.ns * sizeof *x.kc);
    struct sbn_row *v = NULL;
    size_t nv = 0;
    int kmax = 0;
    int rc = x.fr && x.br && x.kc ? sbn_collect(&x, &v, &nv, &kmax)
                                  : error_set("predict: out of memory");
    if (rc == 0 && nv > 0) {
        sbn_keys(&x, v, nv, kmax);
        rc = sort_by_i64(v, nv, sizeof *v, offsetof(struct sbn_row, key))
                 ? error_set("predict: out of memory")
                 : sbn_medians(s, v, nv, x.nr);
        if (rc == 0 && s->m.nheld > 0)
            rc = sbn_order_held(&x);
    }
    free(v);
    free(x.fr);
    free(x.br);
    free(x.kc);
    return rc;
}

/* The interval's step-time spread (rank 0's steady steps: 1 - p10 / p50, p90 / p50 - 1)
 * and rank-arrival skew (the median over stragglers.csv's steps of wait_ms / (ranks - 1))
 * into s->spread (report/FORMULAS.md "The 80 % interval"). */
static int source_spread(struct predict_source *s)
{
    const struct rank_stat *rk0 = &s->st->ranks[0];
    const double p10 = (double)analysis_percentile(rk0->step_ns, rk0->nsteps, 10);
    const double p50 = (double)analysis_percentile(rk0->step_ns, rk0->nsteps, 50);
    const double p90 = (double)analysis_percentile(rk0->step_ns, rk0->nsteps, 90);
    if (p50 > 0) {
        s->spread.steps = rk0->nsteps;
        s->spread.step_lo_rel = 1.0 - p10 / p50;
        s->spread.step_hi_rel = p90 / p50 - 1.0;
    }
    struct dlist w = {0}, a = {0};
    int rc = 0;
    for (size_t k = 0; rc == 0 && k < s->st->nsteps; k++) {
        const struct step_stat *ss = &s->st->steps[k];
        if (ss->ranks >= 2)
            rc = dlist_add(&w, (double)ss->wait_ns / 1e6 / (ss->ranks - 1));
        /* the model's straggler term: the slowest rank's lateness over the mean rank's,
         * sum_r (ready_slowest - ready_r) / ranks, on steps of every rank */
        if (rc == 0 && ss->ranks >= 2 && ss->ranks == s->world)
            rc = dlist_add(&a, (double)ss->wait_ns / 1e6 / ss->ranks);
    }
    if (rc == 0 && w.n > 0) {
        s->spread.skew_steps = w.n;
        s->spread.skew_ms = median(w.v, w.n);
    }
    if (rc == 0 && a.n > 0) {
        s->m.wait_world = s->world;
        s->m.wait_ms = median(a.v, a.n);
    }
    free(w.v);
    free(a.v);
    return rc;
}

/* The source of run index i of rs (st its analysis). */
/* The comm's CPU per byte moved (predict_comm.cpu_ms_per_byte; report/FORMULAS.md "The
 * comm's CPU beside backward"): the mean over ranks of overlap.csv's comm_cpu_ms over the
 * bytes a rank's collectives move a step -- every bucket's (the parameters' gradients) and
 * the held collectives', 2(N-1)/N of each.  Only for a calibrated run of 2 ranks or more
 * whose ranks measured it; else it stays 0 (a borrowed comm brings its own). */
static int source_comm_cpu(struct predict_source *s)
{
    if (!s->calibrated || s->world < 2)
        return 0;
    double cpu = 0.0, n = 0.0, bytes = 0.0;
    for (int q = 0; q < s->st->nranks; q++)
        if (s->st->ranks[q].has_comm_cpu) {
            cpu += s->st->ranks[q].comm_cpu_ns / 1e6;
            n++;
        }
    for (int i = 0; i < s->m.nparams; i++)
        bytes += (double)s->m.params[i].bytes;
    for (int i = 0; i < s->m.nheld; i++)
        bytes += (double)s->m.held_bytes[i];
    const double nn = (double)s->world, moved = 2.0 * (nn - 1.0) / nn * bytes;
    if (!(n > 0 && moved > 0 && cpu > 0))
        return 0;
    s->comm.cpu_ms_per_byte = cpu / n / moved;
    const struct predict_config own = {s->world, s->cap_mb, s->comm};
    struct predict_out o;
    if (predict_replay(&s->m, &own, &o))
        return error_wrap("predict: the comm's CPU");
    s->cpu_bwd_own_ms = o.cpu_bwd_ms;
    return 0;
}

static int source_build(const struct runset *rs, const struct run_stat *st, int i,
                        struct predict_source *s)
{
    memset(s, 0, sizeof *s);
    s->run = &rs->runs[i];
    s->st = &st[i];
    const struct run *r = s->run;
    s->world = r->world_size > 0 ? r->world_size : 1;
    s->batch = r->meta.batch_size.s ? (int)r->meta.batch_size.i : 0;
    s->cap_mb = r->meta.bucket_cap_mb.d;
    if (!r->meta.bucket_cap_mb.s || !(s->cap_mb > 0))
        s->cap_mb = 25.0;
    s->amp = r->meta.amp.s ? r->meta.amp.s : "off";
    if (s->st->nranks < 1 || s->st->ranks[0].nsteps == 0)
        return error_set("%s: no training steps after the warm-up to predict from (a run "
                         "with --trace full or nvtx and more steps)", r->dir);
    const struct rank_stat *rk0 = &s->st->ranks[0];
    s->step_ms = (double)analysis_percentile(rk0->step_ns, rk0->nsteps, 50) / 1e6;
    double n = 0, v;
    for (int q = 0; q < s->st->nranks; q++) {
        const struct rank_stat *rk = &s->st->ranks[q];
        if (rk->nsteps == 0)
            continue;
        n++;
        s->m.data_ms += (v = phase_p50(rs, rk, "data")) > 0 ? v : 0;
        s->m.forward_ms += (v = phase_p50(rs, rk, "forward")) > 0 ? v : 0;
        s->m.backward_ms += (v = phase_p50(rs, rk, "backward")) > 0 ? v : 0;
        s->m.optimizer_ms += (v = phase_p50(rs, rk, "optimizer")) > 0 ? v : 0;
    }
    s->m.data_ms /= n;
    s->m.forward_ms /= n;
    s->m.backward_ms /= n;
    s->m.optimizer_ms /= n;
    const double steps = (double)rk0->nsteps;
    s->compute_ms = (double)rk0->compute_ns / 1e6 / steps;
    s->comm_ms = (double)rk0->comm_ns / 1e6 / steps;
    s->exposed_ms = (double)rk0->exposed_ns / 1e6 / steps;
    s->has_overlap = analysis_overlap_pct(rk0, &s->overlap_pct);
    int rc = source_spread(s);
    if (rc == 0)
        rc = source_layers(rs, st, i, s);
    if (rc == 0)
        rc = source_params(s);
    if (rc == 0)
        rc = source_calibrate(rs, s);
    if (rc == 0)
        rc = source_steps(rs, s);
    if (rc == 0)
        rc = source_comm_cpu(s);
    s->sync_bn = r->meta.sync_bn.s && r->meta.sync_bn.i == 1;
    if (rc == 0)
        rc = source_sync_bn(rs, s);
    return rc;
}

/* Autocast layers (conv, linear) run in the other precision; the rest do not. */
static int layer_autocast(const char *type)
{
    return type && (strcmp(type, "conv") == 0 || strcmp(type, "linear") == 0);
}

/* The model of s with the per-layer times of precision amp from other (a run in that
 * precision): autocast layers take other's times scaled by f, the ratio of s's to other's
 * time over the layers precision does not touch (threads per rank, load), forward and
 * backward change by the layers' change.  *m borrows s's arrays except layers (malloc'd:
 * the caller frees m->layers). */
int predict_model_amp(const struct predict_source *s, const struct predict_source *other,
                      struct predict_model *m)
{
    *m = s->m;
    m->layers = malloc(((size_t)s->m.nlayers + 1) * sizeof *m->layers);
    if (!m->layers)
        return error_set("predict: out of memory");
    memcpy(m->layers, s->m.layers, (size_t)s->m.nlayers * sizeof *m->layers);
    double mine = 0, theirs = 0;
    for (int k = 0; k < s->m.nlayers && k < other->m.nlayers; k++)
        if (!layer_autocast(s->layer_type[k])) {
            mine += s->m.layers[k].fwd_ms + s->m.layers[k].bwd_ms;
            theirs += other->m.layers[k].fwd_ms + other->m.layers[k].bwd_ms;
        }
    const double f = mine > 0 && theirs > 0 ? mine / theirs : 1.0;
    for (int k = 0; k < s->m.nlayers && k < other->m.nlayers; k++) {
        if (!layer_autocast(s->layer_type[k]))
            continue;
        const double fw = other->m.layers[k].fwd_ms * f, bw = other->m.layers[k].bwd_ms * f;
        m->forward_ms += fw - m->layers[k].fwd_ms;
        m->backward_ms += bw - m->layers[k].bwd_ms;
        m->layers[k].fwd_ms = fw;
        m->layers[k].bwd_ms = bw;
    }
    if (m->forward_ms < 0)
        m->forward_ms = 0;
    if (m->backward_ms < 0)
        m->backward_ms = 0;
    return 0;
}

/* ---- the grid ---- */

/* The baseline's measured median step (ms) and batch, from the same definition; 0 when
 * there is no baseline. */
static double baseline_step(const struct runset *rs, const struct run_stat *st, int *batch)
{
    int b = analysis_baseline(rs);
    if (b < 0 || st[b].nranks < 1 || st[b].ranks[0].nsteps == 0)
        return 0.0;
    const struct meta_value *v = &rs->runs[b].meta.batch_size;
    *batch = v->s ? (int)v->i : 0;
    return (double)analysis_percentile(st[b].ranks[0].step_ns, st[b].ranks[0].nsteps, 50) / 1e6;
}

/* The anchored step of s at c (model m) with offset_ms more on every all-reduce's time, in
 * c and in s's own configuration own_c alike, into *step.  0, or -1 after error_set(). */
static int anchored_offset(const struct predict_source *s, const struct predict_model *m,
                           const struct predict_config *own_c, const struct predict_config *c,
                           double offset_ms, double *step)
{
    struct predict_config oc = *own_c, cc = *c;
    oc.comm.offset_ms = offset_ms;
    cc.comm.offset_ms = offset_ms;
    struct predict_out a, b;
    if (predict_replay(&s->m, &oc, &a) || predict_replay(m, &cc, &b))
        return -1;
    *step = s->step_ms + b.step_ms - a.step_ms;
    if (*step <= 0)
        *step = 1e-6;
    return 0;
}

/* The 80 % interval of o's step (report/FORMULAS.md "The 80 % interval"): the step-time
 * spread; the comm term, how far the anchored step moves with the residuals' p10 and p90 of
 * the fit it is predicted with (own_c->comm: s's own or another run's) on every
 * all-reduce's time; the skew, scaled to c's world by the straggler term's ratio (from a
 * 1-rank run: the straggler term itself). */
static int one_interval(const struct predict_source *s, const struct predict_model *m,
                        const struct predict_config *own_c, const struct predict_out *own,
                        const struct predict_config *c, struct predict_out *o)
{
    const struct predict_spread *sp = &s->spread;
    double comm_lo = 0, comm_hi = 0;
    const double off[2] = {own_c->comm.resid_lo_ms, own_c->comm.resid_hi_ms};
    for (int k = 0; k < 2 && c->world > 1 && own_c->comm.resid_sizes > 0; k++) {
        double step;
        if (off[k] == 0.0)
            continue;
        if (anchored_offset(s, m, own_c, c, off[k], &step))
            return -1;
        if (o->step_ms - step > comm_lo)
            comm_lo = o->step_ms - step;
        if (step - o->step_ms > comm_hi)
            comm_hi = step - o->step_ms;
    }
    double skew = 0;
    if (c->world > 1 && s->world > 1)
        skew = own->straggler_ms > 0 ? sp->skew_ms * o->straggler_ms / own->straggler_ms
                                     : sp->skew_ms;
    else if (c->world > 1)
        skew = o->straggler_ms;
    predict_interval_combine(o->step_ms, sp->step_lo_rel, sp->step_hi_rel, comm_lo, comm_hi,
                             skew, &o->step_lo_ms, &o->step_hi_ms);
    return 0;
}

void predict_measured_interval(const struct predict_source *s, double *lo, double *hi)
{
    predict_interval_combine(s->step_ms, s->spread.step_lo_rel, s->spread.step_hi_rel, 0, 0,
                             s->world > 1 ? s->spread.skew_ms : 0, lo, hi);
}

/* One prediction of s at (world, cap, comm, amp model m): anchored at the measured step.
 * own: the replay of s's own configuration own_c. */
int predict_one(const struct predict_source *s, const struct predict_model *m,
                const struct predict_config *own_c, const struct predict_out *own,
                const struct predict_config *c, struct predict_out *o)
{
    if (predict_replay(m, c, o))
        return -1;
    o->step_ms = s->step_ms + o->step_ms - own->step_ms;
    if (o->step_ms <= 0)
        o->step_ms = 1e-6;
    if (one_interval(s, m, own_c, own, c, o))
        return -1;
    /* the parts as overlap.csv measures them (the measured row's): its compute, its
     * communication (every collective, with the wait for a late rank) and the exposed part,
     * each changed by the replay's change -- the all-reduces' and the held collectives'
     * time, and the straggler wait, which overlap.csv sees as exposed communication */
    if (s->has_overlap || s->comm_ms > 0 || s->compute_ms > 0) {
        const double comm = o->comm_ms + o->held_ms + o->straggler_ms,
                     own_comm = own->comm_ms + own->held_ms + own->straggler_ms;
        const double exposed = o->exposed_comm_ms + o->straggler_ms,
                     own_exposed = own->exposed_comm_ms + own->straggler_ms;
        o->compute_ms = s->compute_ms + o->compute_ms - own->compute_ms;
        o->comm_ms = s->comm_ms + comm - own_comm;
        o->exposed_comm_ms = s->exposed_ms + exposed - own_exposed;
        if (o->compute_ms < 0)
            o->compute_ms = 0;
        if (o->comm_ms < 0)
            o->comm_ms = 0;
        if (o->exposed_comm_ms < 0)
            o->exposed_comm_ms = 0;
        if (o->exposed_comm_ms > o->comm_ms)
            o->exposed_comm_ms = o->comm_ms;
        o->overlap_pct = o->comm_ms > 0 ? 100.0 * (o->comm_ms - o->exposed_comm_ms) / o->comm_ms
                                        : 0.0;
    }
    return 0;
}

/* The comm s is predicted with: calibrated from s, else from another run of the set, else
 * none (returns 0). */
int predict_source_comm(const struct predict_source *s, const struct predict_source *others,
                        int nothers, struct predict_comm *c, const char **from)
{
    if (s->calibrated) {
        *c = s->comm;
        *from = s->run->label;
        return 1;
    }
    for (int i = 0; i < nothers; i++)
        if (others[i].calibrated) {
            *c = others[i].comm;
            *from = others[i].run->label;
            return 1;
        }
    return 0;
}








int predict_grid_init(struct predict_grid *g)
{
    g->src = calloc((size_t)g->rs->n + 1, sizeof *g->src);
    if (!g->src)
        return error_set("predict: out of memory");
    for (int i = 0; i < g->rs->n; i++) {
        if (source_build(g->rs, g->st, i, &g->src[i])) {
            if (i == g->which)
                return -1;
            source_free(&g->src[i]); /* a sibling that cannot be modelled: not used */
            g->src[i].run = NULL;
        }
    }
    g->base_step = baseline_step(g->rs, g->st, &g->base_batch);
    return 0;
}

void predict_grid_free(struct predict_grid *g)
{
    for (int i = 0; g->src && i < g->rs->n; i++)
        source_free(&g->src[i]);
    free(g->src);
}

/* the source of another run in precision amp with per-layer times, or NULL */
const struct predict_source *predict_amp_source(const struct predict_grid *g, const char *amp)
{
    for (int i = 0; i < g->rs->n; i++)
        if (i != g->which && g->src[i].run && g->src[i].layered &&
            strcmp(g->src[i].amp, amp) == 0)
            return &g->src[i];
    return NULL;
}

double predict_speedup_of(const struct predict_grid *g, int world, int batch, double step_ms)
{
    if (!(g->base_step > 0) || g->base_batch <= 0 || batch <= 0 || !(step_ms > 0))
        return -1;
    return ((double)world * batch / step_ms) / ((double)g->base_batch / g->base_step);
}


/* Which run of rs to predict from: the one at dir when dir is a run, else the DDP run,
 * else the first. */
int predict_pick(const struct runset *rs, int dir_is_run)
{
    if (dir_is_run)
        return 0;
    for (int i = 0; i < rs->n; i++)
        if (run_mode_is(&rs->runs[i], "ddp"))
            return i;
    return 0;
}

/* What an asked bandwidth carries as payload (FORMULAS.md): over TCP (meta.csv comm_link
 * tcp; runs before comm_link, 2026-12-07, name only their comm: gloo was the one over TCP)
 * PREDICT_TCP_EFFICIENCY of the link's rate, else all of it. */
double predict_link_efficiency(const struct predict_source *s)
{
    const char *link = s->run->meta.comm_link.s, *comm_name = s->run->meta.comm.s;
    const int tcp = link ? strcmp(link, "tcp") == 0 : comm_name && strcmp(comm_name, "gloo") == 0;
    return tcp ? PREDICT_TCP_EFFICIENCY : 1.0;
}

/* ---- the report's "what if" ---- */


/* candidate caps of the search (MB) */
static const double whatif_caps[] = {0.25, 0.5, 1, 2, 4, 8, 16, 25, 50, 100};
_Static_assert(sizeof whatif_caps / sizeof *whatif_caps + 4 == PREDICT_WHATIF_CANDIDATES,
               "the fixed caps and the 4 fractions of the model are the candidates");

int predict_whatif_figures(const struct runset *rs, const struct run_stat *st,
                           struct predict_whatif *w)
{
    memset(w, 0, sizeof *w);
    w->run = -1;
    for (int i = 0; i < rs->n && w->run < 0; i++)
        if (run_mode_is(&rs->runs[i], "ddp") && rs->runs[i].world_size > 1 &&
            strcmp(rs->runs[i].format, "ddpprof") == 0)
            w->run = i;
    if (w->run < 0)
        return 0;
    struct predict_grid g = {.rs = rs, .st = st, .which = w->run};
    if (predict_grid_init(&g)) {
        snprintf(w->why, sizeof w->why, "%s", error_get());
        predict_grid_free(&g);
        return 0;
    }
    const struct predict_source *s = &g.src[w->run];
    if (!s->calibrated) {
        snprintf(w->why, sizeof w->why, "no all-reduce rows to calibrate the comm from");
        predict_grid_free(&g);
        return 0;
    }
    w->comm = s->comm;
    w->world = s->world;
    w->cap_mb = s->cap_mb;
    w->step_ms = s->step_ms;
    w->speedup = predict_speedup_of(&g, s->world, s->batch, s->step_ms);
    /* the candidates: the fixed list, and halves down to a sixteenth of the model's
     * gradients (a small model fits in one bucket at every fixed cap) */
    double total = 0;
    for (int i = 0; i < s->m.nparams; i++)
        total += (double)s->m.params[i].bytes;
    for (int d = 16; d >= 2; d /= 2)
        if (total / d / 1048576.0 < whatif_caps[0])
            w->cands[w->ncand++] = total / d / 1048576.0;
    for (size_t k = 0; k < sizeof whatif_caps / sizeof *whatif_caps; k++)
        w->cands[w->ncand++] = whatif_caps[k];
    struct predict_config own = {.world = s->world, .bucket_cap_mb = s->cap_mb, .comm = s->comm};
    struct predict_out own_out, cur, p;
    int rc = predict_replay(&s->m, &own, &own_out);
    if (rc == 0)
        rc = predict_one(s, &s->m, &own, &own_out, &own, &cur);
    predict_measured_interval(s, &w->step_lo_ms, &w->step_hi_ms);
    w->exposed_ms = cur.exposed_comm_ms;
    w->best_cap_mb = s->cap_mb;
    w->best_step_ms = cur.step_ms;
    w->best_exposed_ms = cur.exposed_comm_ms;
    w->best_lo_ms = cur.step_lo_ms;
    w->best_hi_ms = cur.step_hi_ms;
    for (int k = 0; rc == 0 && k < w->ncand; k++) {
        struct predict_config c = own;
        c.bucket_cap_mb = w->cands[k];
        if ((rc = predict_one(s, &s->m, &own, &own_out, &c, &p)))
            break;
        if (p.step_ms < w->best_step_ms - 1e-9) {
            w->best_cap_mb = w->cands[k];
            w->best_step_ms = p.step_ms;
            w->best_exposed_ms = p.exposed_comm_ms;
            w->best_lo_ms = p.step_lo_ms;
            w->best_hi_ms = p.step_hi_ms;
        }
    }
    for (int k = 0; rc == 0 && k < 2; k++) {
        struct predict_config c = own;
        c.world = s->world * (k ? 4 : 2);
        c.bucket_cap_mb = w->best_cap_mb;
        if ((rc = predict_one(s, &s->m, &own, &own_out, &c, &p)))
            break;
        w->scale[k].world = c.world;
        w->scale[k].step_ms = p.step_ms;
        w->scale[k].lo_ms = p.step_lo_ms;
        w->scale[k].hi_ms = p.step_hi_ms;
        w->scale[k].exposed_ms = p.exposed_comm_ms;
        w->scale[k].speedup = predict_speedup_of(&g, c.world, s->batch, p.step_ms);
        w->scale[k].gain = (double)c.world / p.step_ms / ((double)s->world / s->step_ms);
    }
    predict_grid_free(&g);
    if (rc)
        return -1;
    w->ok = 1;
    return 0;
}

