/* analysis.c — phase statistics, interval unions (overlap, exposed communication, idle),
 * per-bucket all-reduce figures, stragglers and speedup (see analysis.h and FORMULAS.md).
 * Each rank is analysed in five steps (analysis_rank): select the rows that count, phase
 * statistics, overlap unions, bucket entries, step marks; the run's buckets and steps are
 * then joined over its ranks.  Work is linear in the rows apart from sorts; temporaries
 * are freed per step. */
#include "report/analysis/analysis.h"

#include <stddef.h>
#include <stdio.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/vec.h"
#include "probes/trace_format.h"
#include "report/input/sort.h"

const char *const seg_names[SEG_COUNT] = {"data", "forward", "backward", "optimizer",
                                          "exposed comm", "other"};

/* The phases of the trace format (probes/trace_format.h) in report order (FORMULAS.md);
 * other phase names follow, by name. */
static const enum trace_phase analysis_order[] = {
    TRACE_PHASE_STEP,      TRACE_PHASE_DATA,      TRACE_PHASE_FORWARD,
    TRACE_PHASE_BACKWARD,  TRACE_PHASE_ALLREDUCE, TRACE_PHASE_OPTIMIZER,
    TRACE_PHASE_BARRIER,   TRACE_PHASE_EVAL,      TRACE_PHASE_SETUP,
    TRACE_PHASE_COMM_ALLREDUCE, TRACE_PHASE_COMM_BROADCAST, TRACE_PHASE_COMM_ALLGATHER,
    TRACE_PHASE_COMM_REDUCE_SCATTER, TRACE_PHASE_COMM_REDUCE, TRACE_PHASE_LAYER_FORWARD,
    TRACE_PHASE_LAYER_BACKWARD};
_Static_assert(sizeof analysis_order / sizeof *analysis_order == TRACE_PHASE_COUNT,
               "every phase of the trace format has its place in the report order");

struct ivl {
    int64_t s, e;
};

struct analysis_ctx {
    const struct runset *rs;
    int *dense;           /* labels id -> dense phase index, or -1 */
    uint32_t *dense_label; /* dense phase index -> labels id */
    int ndense;
    int known[TRACE_PHASE_COUNT]; /* dense index of each phase of the format, or -1 */
    uint32_t range_kind; /* labels id of "range" */
    uint32_t cpu_kind;   /* labels id of "cpu" (STRPOOL_NONE: no such rows) */
    uint32_t device_kind[3]; /* labels ids of "kernel", "memcpy", "memset" (or NONE) */
    int warmup_last; /* the run's last warm-up step (0: none), see analysis_skip_warmup */
    int gpu_run;     /* the run's meta.csv says device cuda: analysis_cupti_ranges applies */
};

/* One all-reduce row, for the per-bucket table. */
struct bucket_entry {
    int64_t key; /* bucket * 2^32 + step: the sort key, grouping each collective's rows */
    int64_t dur_ns, hidden_ns, bytes, start_ns;
};

/* One rank's step, for the stragglers table. */
struct step_entry {
    int64_t key; /* step * 2^32 + rank: the sort key */
    int32_t step, rank;
    int64_t compute_ns, ready_ns;
};

/* One step or backward end, before the per-step join. */
struct step_mark {
    int64_t step;     /* the sort key */
    int64_t is_ready; /* 0: a step range's start; 1: a backward range's end */
    int64_t t_ns;
};

/* The all-reduce rows and the step entries of a run's ranks, grown by appending. */
struct bucket_list {
    struct bucket_entry *v;
    size_t n, cap;
};

struct step_list {
    struct step_entry *v;
    size_t n, cap;
};

/* One call of a collective other than the gradient buckets (SyncBatchNorm's, a buffer
 * broadcast, a barrier) inside a step, for run_stat.colls. */
struct coll_entry {
    int64_t key; /* dense phase * 2^48 + the call's index in its step on its rank (the
                    gradient buckets': the bucket) * 2^32 + step: the sort key, grouping
                    each call's rows over the ranks */
    int64_t dur_ns;
    int32_t rk; /* the rank's index in run.ranks */
};

struct coll_list {
    struct coll_entry *v;
    size_t n, cap;
};

int64_t analysis_percentile(const int64_t *sorted, size_t n, int p)
{
    if (n == 0)
        return 0;
    size_t rank = ((size_t)p * n + 99) / 100; /* ceil(p * n / 100) */
    if (rank < 1)
        rank = 1;
    return sorted[rank - 1];
}

/* Sort and merge overlapping or touching intervals in place; returns the new count, or
 * sets *err after error_set() (out of memory). */
static size_t ivl_merge(struct ivl *v, size_t n, int *err)
{
    if (n == 0)
        return 0;
    if (sort_by_i64(v, n, sizeof *v, offsetof(struct ivl, s)) < 0) {
        *err = 1;
        return 0;
    }
    size_t out = 1;
    for (size_t i = 1; i < n; i++) {
        if (v[i].s <= v[out - 1].e) {
            if (v[i].e > v[out - 1].e)
                v[out - 1].e = v[i].e;
        } else {
            v[out++] = v[i];
        }
    }
    return out;
}

static int64_t ivl_len(const struct ivl *v, size_t n)
{
    int64_t sum = 0;
    for (size_t i = 0; i < n; i++)
        sum += v[i].e - v[i].s;
    return sum;
}

/* |A ∩ B| for two merged lists. */
static int64_t ivl_inter(const struct ivl *a, size_t na, const struct ivl *b, size_t nb)
{
    int64_t sum = 0;
    size_t i = 0, j = 0;
    while (i < na && j < nb) {
        int64_t lo = a[i].s > b[j].s ? a[i].s : b[j].s;
        int64_t hi = a[i].e < b[j].e ? a[i].e : b[j].e;
        if (hi > lo)
            sum += hi - lo;
        if (a[i].e < b[j].e)
            i++;
        else
            j++;
    }
    return sum;
}

/* The merged union of two merged lists into out (room for na + nb); returns its count. */
static size_t ivl_union2(const struct ivl *a, size_t na, const struct ivl *b, size_t nb,
                         struct ivl *out)
{
    size_t i = 0, j = 0, n = 0;
    while (i < na || j < nb) {
        struct ivl x = (j >= nb || (i < na && a[i].s <= b[j].s)) ? a[i++] : b[j++];
        if (n > 0 && x.s <= out[n - 1].e) {
            if (x.e > out[n - 1].e)
                out[n - 1].e = x.e;
        } else {
            out[n++] = x;
        }
    }
    return n;
}

/* |[s, e) ∩ U| for a merged list U. */
static int64_t ivl_overlap_one(const struct ivl *u, size_t n, int64_t s, int64_t e)
{
    size_t lo = 0, hi = n; /* first interval ending after s */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (u[mid].e <= s)
            lo = mid + 1;
        else
            hi = mid;
    }
    int64_t sum = 0;
    for (size_t k = lo; k < n && u[k].s < e; k++) {
        int64_t a = u[k].s > s ? u[k].s : s, b = u[k].e < e ? u[k].e : e;
        if (b > a)
            sum += b - a;
    }
    return sum;
}

/* ---- the formulas of report/FORMULAS.md, one function each ---- */

double analysis_mean_ns(int64_t total_ns, size_t count)
{
    return (double)total_ns / (double)count;
}

/* a \ b for merged lists a, b into out (room for na + nb intervals); returns the count */
static size_t ivl_diff(const struct ivl *a, size_t na, const struct ivl *b, size_t nb,
                       struct ivl *out)
{
    size_t n = 0, j = 0;
    for (size_t i = 0; i < na; i++) {
        int64_t s = a[i].s;
        while (j < nb && b[j].e <= s)
            j++;
        for (size_t k = j; k < nb && b[k].s < a[i].e; k++) {
            if (b[k].s > s)
                out[n++] = (struct ivl){s, b[k].s};
            if (b[k].e > s)
                s = b[k].e;
        }
        if (s < a[i].e)
            out[n++] = (struct ivl){s, a[i].e};
    }
    return n;
}

/* exposed_comm_ms: |M| - |M ∩ C| for the merged unions M (communication), C (compute) */
static int64_t analysis_exposed_ns(const struct ivl *m, size_t nm, const struct ivl *c,
                                   size_t nc)
{
    return ivl_len(m, nm) - ivl_inter(m, nm, c, nc);
}

/* idle_ms: |S| - |S ∩ (C ∪ M)| for the merged unions S (steps) and C ∪ M */
static int64_t analysis_idle_ns(const struct ivl *s, size_t ns, const struct ivl *cm,
                                size_t ncm)
{
    return ivl_len(s, ns) - ivl_inter(s, ns, cm, ncm);
}

/* The chart's last segments: exposed comm, and other = the step time less every other
 * segment (not below 0).  The phase segments and exposed_ns are set. */
static void analysis_segments(struct rank_stat *r)
{
    r->seg_ns[SEG_EXPOSED] = r->exposed_ns;
    int64_t other = r->step_total_ns;
    for (int s = 0; s < SEG_OTHER; s++)
        other -= r->seg_ns[s];
    r->seg_ns[SEG_OTHER] = other > 0 ? other : 0;
}

int analysis_pct_of_step(const struct rank_stat *r, const struct phase_stat *ps, double *pct)
{
    if (!ps->in_steps || r->step_total_ns <= 0)
        return 0;
    *pct = 100.0 * (double)ps->in_steps_ns / (double)r->step_total_ns;
    return 1;
}

int analysis_overlap_pct(const struct rank_stat *r, double *pct)
{
    if (r->comm_ns <= 0)
        return 0;
    *pct = 100.0 * (double)(r->comm_ns - r->exposed_ns) / (double)r->comm_ns;
    return 1;
}

int analysis_algbw(const struct bucket_stat *b, double *gbps)
{
    double mean_ns = analysis_mean_ns(b->total_ns, b->count);
    if (!(mean_ns > 0) || b->bytes < 0)
        return 0;
    *gbps = (double)b->bytes / mean_ns; /* bytes per ns = GB/s */
    return 1;
}

double analysis_busbw(double algbw_gbps, int world_size)
{
    return algbw_gbps * 2.0 * (world_size - 1) / world_size;
}

int analysis_pct_hidden(const struct bucket_stat *b, double *pct)
{
    if (b->total_ns <= 0)
        return 0;
    *pct = 100.0 * (double)b->hidden_ns / (double)b->total_ns;
    return 1;
}

int analysis_transfer_ns(const struct bucket_stat *b, double *ns)
{
    if (b->collectives == 0)
        return 0;
    *ns = (double)b->transfer_ns / (double)b->collectives;
    return 1;
}

int analysis_sync_wait_ns(const struct bucket_stat *b, double *ns)
{
    if (b->count == 0)
        return 0;
    *ns = analysis_mean_ns(b->wait_ns, b->count);
    return 1;
}

int analysis_start_skew_ns(const struct bucket_stat *b, double *ns)
{
    if (b->skewed == 0)
        return 0;
    *ns = (double)b->skew_ns / (double)b->skewed;
    return 1;
}

int analysis_xfer_algbw(const struct bucket_stat *b, double *gbps)
{
    double t;
    if (b->bytes < 0 || !analysis_transfer_ns(b, &t) || !(t > 0))
        return 0;
    *gbps = (double)b->bytes / t; /* bytes per ns = GB/s */
    return 1;
}

int analysis_kernel_overlap_pct(const struct kernel_sweep *k, double *pct)
{
    if (k->comm.total <= 0)
        return 0;
    /* |M ∩ C| = |M| + |C| - |M ∪ C| */
    int64_t both = k->comm.total + k->compute.total - k->cc.total;
    *pct = 100.0 * (double)both / (double)k->comm.total;
    return 1;
}

int64_t analysis_kernel_idle_ns(const struct kernel_sweep *k)
{
    return k->count > 0 ? (k->last_ns - k->first_ns) - k->all.total : 0;
}

int analysis_host_wait_ns(const struct kernel_sweep *k, int64_t *ns)
{
    if (k->launches_known == 0)
        return 0;
    *ns = k->host_wait_ns;
    return 1;
}

int analysis_kernel_gap_ns(const struct kernel_sweep *k, int64_t *ns)
{
    if (k->launches_known == 0)
        return 0;
    *ns = analysis_kernel_idle_ns(k) - k->host_wait_ns;
    return 1;
}

/* stragglers.csv for one step: e[0..n) are the entries of its ranks (n >= 2), in rank
 * order.  The slowest rank is the one whose gradients were ready last (the lowest rank on
 * a tie); skew = max - min of compute_r; wait = Σ (ready_slowest - ready_r). */
static void analysis_straggler(const struct step_entry *e, size_t n, struct step_stat *s)
{
    s->step = e[0].step;
    s->ranks = (int)n;
    size_t slow = 0;
    s->max_compute_ns = s->min_compute_ns = e[0].compute_ns;
    for (size_t k = 0; k < n; k++) {
        if (e[k].ready_ns > e[slow].ready_ns)
            slow = k;
        if (e[k].compute_ns > s->max_compute_ns)
            s->max_compute_ns = e[k].compute_ns;
        if (e[k].compute_ns < s->min_compute_ns)
            s->min_compute_ns = e[k].compute_ns;
    }
    s->slowest_rank = e[slow].rank;
    s->skew_ns = s->max_compute_ns - s->min_compute_ns;
    for (size_t k = 0; k < n; k++)
        s->wait_ns += e[slow].ready_ns - e[k].ready_ns;
}

double analysis_images_per_s(int64_t images, double seconds)
{
    return (double)images / seconds;
}

double analysis_speedup(double images_per_s, double baseline_images_per_s)
{
    return images_per_s / baseline_images_per_s;
}

double analysis_efficiency(double speedup, int world_size)
{
    return speedup / world_size;
}

double analysis_seg_ms_per_step(const struct rank_stat *r, enum seg s)
{
    return (double)r->seg_ns[s] * 1e-6 / (double)r->nsteps;
}

static int cmp_label_name(const void *a, const void *b, void *pool)
{
    return strcmp(strpool_get(pool, *(const uint32_t *)a), strpool_get(pool, *(const uint32_t *)b));
}

/* Dense phase indices: the known phases present, then any others by name. */
static int analysis_ctx_init(struct analysis_ctx *c, const struct runset *rs)
{
    memset(c, 0, sizeof *c);
    c->rs = rs;
    uint32_t nl = rs->labels.n;
    c->dense = malloc((nl + 1) * sizeof *c->dense);
    c->dense_label = malloc((nl + 1) * sizeof *c->dense_label);
    char *used = calloc(nl + 1, 1);
    if (!c->dense || !c->dense_label || !used) {
        free(used);
        return error_set("report: out of memory indexing %u phase names", nl);
    }
    for (int i = 0; i < rs->n; i++)
        for (int k = 0; k < rs->runs[i].nranks; k++) {
            const struct rank_trace *t = &rs->runs[i].ranks[k];
            for (size_t r = 0; r < t->n; r++)
                used[t->rows[r].phase] = 1;
        }
    for (uint32_t id = 0; id < nl; id++)
        c->dense[id] = -1;
    for (int k = 0; k < TRACE_PHASE_COUNT; k++) {
        enum trace_phase ph = analysis_order[k];
        uint32_t id = strpool_find(&rs->labels, trace_phase_name(ph));
        c->known[ph] = -1;
        if (id != STRPOOL_NONE && used[id]) {
            c->known[ph] = c->ndense;
            c->dense[id] = c->ndense;
            c->dense_label[c->ndense++] = id;
        }
    }
    int first_other = c->ndense;
    for (uint32_t id = 0; id < nl; id++)
        if (used[id] && c->dense[id] < 0)
            c->dense_label[c->ndense++] = id;
    qsort_r(c->dense_label + first_other, (size_t)(c->ndense - first_other),
            sizeof *c->dense_label, cmp_label_name, (void *)&rs->labels);
    for (int d = first_other; d < c->ndense; d++)
        c->dense[c->dense_label[d]] = d;
    c->range_kind = strpool_find(&rs->labels, trace_kind_name(TRACE_KIND_RANGE));
    c->cpu_kind = strpool_find(&rs->labels, trace_kind_name(TRACE_KIND_CPU));
    static const enum trace_kind dev_kinds[3] = {TRACE_KIND_KERNEL, TRACE_KIND_MEMCPY,
                                                 TRACE_KIND_MEMSET};
    for (int k = 0; k < 3; k++)
        c->device_kind[k] = strpool_find(&rs->labels, trace_kind_name(dev_kinds[k]));
    free(used);
    return 0;
}

static void analysis_ctx_free(struct analysis_ctx *c)
{
    free(c->dense);
    free(c->dense_label);
}

/* ---- one rank: analysis_rank and its five steps ---- */

/* The selected rows of one rank (FORMULAS.md "Which rows count"), grouped by dense phase:
 * t->rows[idx[i]] for i in first[p] .. first[p + 1] - 1 are those of dense phase p. */
struct rank_sel {
    const struct rank_trace *t;
    size_t *first; /* ndense + 1 entries */
    size_t *idx;
};

static int analysis_oom(const struct rank_trace *t)
{
    return error_set("%s: out of memory analysing %zu rows", t->path, t->n);
}

/* The number of selected rows of the given dense phases (-1: absent, skipped). */
static size_t analysis_count(const struct rank_sel *sel, const int *phases, int nphases)
{
    size_t n = 0;
    for (int k = 0; k < nphases; k++)
        if (phases[k] >= 0)
            n += sel->first[phases[k] + 1] - sel->first[phases[k]];
    return n;
}

/* The intervals of the selected rows of the given dense phases into v; returns the count. */
static size_t analysis_fill(const struct rank_sel *sel, const int *phases, int nphases,
                            struct ivl *v)
{
    const struct run_row *rows = sel->t->rows;
    size_t n = 0;
    for (int k = 0; k < nphases; k++) {
        if (phases[k] < 0)
            continue;
        for (size_t i = sel->first[phases[k]]; i < sel->first[phases[k] + 1]; i++) {
            v[n].s = rows[sel->idx[i]].start_ns;
            v[n].e = rows[sel->idx[i]].end_ns;
            n++;
        }
    }
    return n;
}

/* The merged union of the selected rows of the given dense phases: a new array in *out
 * (the caller frees it) of *n intervals.  0, or -1 after error_set(). */
static int analysis_union(const struct rank_sel *sel, const int *phases, int nphases,
                          struct ivl **out, size_t *n)
{
    struct ivl *v = malloc((analysis_count(sel, phases, nphases) + 1) * sizeof *v);
    if (!v)
        return analysis_oom(sel->t);
    int err = 0;
    *n = ivl_merge(v, analysis_fill(sel, phases, nphases, v), &err);
    if (err) {
        free(v);
        return error_wrap("%s", sel->t->path);
    }
    *out = v;
    return 0;
}

/* Step 0, device time from CUPTI rows (FORMULAS.md "Device time from CUPTI rows"): a rank
 * traced at --trace kernels (the default) has cupti rows -- kernels, memcpys and memsets
 * attributed to the phase, step and bucket of the range that launched them -- and no
 * device rows.  On a rank of a GPU run (meta.csv device cuda) without any device range
 * row, a host range that is the only one of its (phase, step, bucket) gets a device row: its own, spanning from the first start
 * to the last end of the cupti rows of its key and of every key with a host row inside it (a step holds its forward, backward and buckets; forward holds SyncBatchNorm's
 * all-gathers).  Ranges that share a key (the other collectives, several a step) keep
 * their host rows.  *view is t with those rows appended, in *owned (NULL and view = t when
 * none are made); *derived has bit 1 << p for each enum trace_phase p given rows. */
struct cupti_span {
    int64_t key; /* analysis_cupti_key, the sort key */
    int64_t s, e;
};

struct cupti_host {
    int64_t step; /* the sort key of the grouping */
    int64_t key, s, e;
    size_t row;
    int candidate;
};

/* phase (dense index), bucket and step of a training-step row as one sortable key, or -1 */
static int64_t analysis_cupti_key(const struct analysis_ctx *c, const struct run_row *row)
{
    if (row->step < 1 || row->bucket < -1 || row->bucket >= 0xFFFF || c->dense[row->phase] < 0)
        return -1;
    return (int64_t)c->dense[row->phase] << 48 | (int64_t)(row->bucket + 1) << 32 |
           (int64_t)(uint32_t)row->step;
}

static const struct cupti_span *cupti_span_find(const struct cupti_span *v, size_t n,
                                                int64_t key)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (v[mid].key < key)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < n && v[lo].key == key ? &v[lo] : NULL;
}

/* k[0..n) sorted by key: one span per key, from the first start to the last end of its
 * rows; the count of them */
static size_t cupti_spans_merge(struct cupti_span *k, size_t n)
{
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (m > 0 && k[m - 1].key == k[i].key) {
            if (k[i].s < k[m - 1].s)
                k[m - 1].s = k[i].s;
            if (k[i].e > k[m - 1].e)
                k[m - 1].e = k[i].e;
        } else {
            k[m++] = k[i];
        }
    }
    return m;
}

/* h[0..n) sorted by key: a host range that is the only one of its key is a candidate for
 * a device row; how many are */
static size_t cupti_candidates(struct cupti_host *h, size_t n)
{
    size_t ncand = 0;
    for (size_t i = 0; i < n;) {
        size_t j = i + 1;
        while (j < n && h[j].key == h[i].key)
            j++;
        h[i].candidate = j == i + 1;
        ncand += (size_t)h[i].candidate;
        i = j;
    }
    return ncand;
}

static int analysis_cupti_ranges(const struct analysis_ctx *c, const struct rank_trace *t,
                                 struct rank_trace *view, struct run_row **owned,
                                 unsigned *derived)
{
    *view = *t;
    *owned = NULL;
    *derived = 0;
    if (!c->gpu_run || t->has_kernels || c->ndense >= (1 << 14) ||
        c->range_kind == STRPOOL_NONE)
        return 0;
    const struct run_row *rows = t->rows;
    size_t nk = 0, nh = 0;
    for (size_t r = 0; r < t->n; r++) {
        if (analysis_cupti_key(c, &rows[r]) < 0)
            continue;
        if (rows[r].clock == TRACE_CLOCK_CUPTI &&
            (rows[r].kind == c->device_kind[0] || rows[r].kind == c->device_kind[1] ||
             rows[r].kind == c->device_kind[2]))
            nk++;
        else if (rows[r].clock == TRACE_CLOCK_HOST && rows[r].kind == c->range_kind)
            nh++;
    }
    if (nk == 0 || nh == 0)
        return 0;
    for (size_t r = 0; r < t->n; r++)
        if (rows[r].kind == c->range_kind && rows[r].clock == TRACE_CLOCK_DEVICE)
            return 0; /* CUDA events time this rank (--trace full) */
    struct cupti_span *k = malloc(nk * sizeof *k);
    struct cupti_host *h = malloc(nh * sizeof *h);
    struct run_row *out = NULL;
    int rc = -1;
    if (!k || !h)
        goto done;
    nk = nh = 0;
    for (size_t r = 0; r < t->n; r++) {
        const struct run_row *row = &rows[r];
        const int64_t key = analysis_cupti_key(c, row);
        if (key < 0)
            continue;
        if (row->clock == TRACE_CLOCK_CUPTI &&
            (row->kind == c->device_kind[0] || row->kind == c->device_kind[1] ||
             row->kind == c->device_kind[2]))
            k[nk++] = (struct cupti_span){key, row->start_ns, row->end_ns};
        else if (row->clock == TRACE_CLOCK_HOST && row->kind == c->range_kind)
            h[nh++] = (struct cupti_host){row->step, key, row->start_ns, row->end_ns, r, 0};
    }
    if (sort_by_i64(k, nk, sizeof *k, offsetof(struct cupti_span, key)) < 0 ||
        sort_by_i64(h, nh, sizeof *h, offsetof(struct cupti_host, key)) < 0)
        goto done;
    nk = cupti_spans_merge(k, nk);
    const size_t ncand = cupti_candidates(h, nh);
    if (ncand == 0) {
        rc = 0;
        goto done;
    }
    if (sort_by_i64(h, nh, sizeof *h, offsetof(struct cupti_host, step)) < 0)
        goto done;
    out = malloc((t->n + ncand) * sizeof *out);
    if (!out)
        goto done;
    memcpy(out, rows, t->n * sizeof *out);
    size_t n = t->n;
    for (size_t i = 0; i < nh;) {
        size_t j = i + 1;
        while (j < nh && h[j].step == h[i].step)
            j++;
        for (size_t p = i; p < j; p++) {
            if (!h[p].candidate)
                continue;
            int64_t s = INT64_MAX, e = INT64_MIN;
            for (size_t q = i; q < j; q++) {
                if (h[q].s < h[p].s || h[q].e > h[p].e)
                    continue;
                const struct cupti_span *sp = cupti_span_find(k, nk, h[q].key);
                if (sp && sp->s < s)
                    s = sp->s;
                if (sp && sp->e > e)
                    e = sp->e;
            }
            if (s > e)
                continue; /* launched nothing */
            out[n] = rows[h[p].row];
            out[n].clock = TRACE_CLOCK_DEVICE;
            out[n].start_ns = s;
            out[n].end_ns = e;
            for (int ph = 0; ph < TRACE_PHASE_COUNT; ph++)
                if (c->known[ph] >= 0 && c->known[ph] == c->dense[out[n].phase])
                    *derived |= 1u << ph;
            n++;
        }
        i = j;
    }
    view->rows = out;
    view->n = n;
    *owned = out;
    out = NULL;
    rc = 0;
done:
    free(k);
    free(h);
    free(out);
    return rc < 0 ? analysis_oom(t) : 0;
}

/* Step 1, which rows count: ranges, on the device clock where this rank has device rows of
 * the phase, else on the host clock.  Fills sel (free sel->first and sel->idx). */
static int analysis_select(const struct analysis_ctx *c, const struct rank_trace *t,
                           struct rank_sel *sel, unsigned *dev_mask)
{
    const struct run_row *rows = t->rows;
    int nd = c->ndense;
    sel->t = t;
    sel->first = calloc((size_t)nd + 2, sizeof *sel->first);
    sel->idx = NULL;
    char *dev = calloc((size_t)nd + 1, 1);
    size_t *fill = NULL;
    int rc = -1;
    if (!sel->first || !dev)
        goto done;
    for (size_t r = 0; r < t->n; r++)
        if (rows[r].kind == c->range_kind && rows[r].clock == TRACE_CLOCK_DEVICE)
            dev[c->dense[rows[r].phase]] = 1;
    /* step -1: the comm's calibration all-reduces at DDP setup (probes/TRACE.md), for
     * `ddpprof predict` only -- no table counts them */
#define SELECTED(row)                                                                        \
    ((row).kind == c->range_kind && (row).step >= 0 &&                                       \
     ((row).clock == TRACE_CLOCK_DEVICE ||                                                   \
      ((row).clock == TRACE_CLOCK_HOST && !dev[c->dense[(row).phase]])))
    for (size_t r = 0; r < t->n; r++)
        if (SELECTED(rows[r]))
            sel->first[c->dense[rows[r].phase] + 1]++;
    for (int p = 0; p < nd; p++)
        sel->first[p + 1] += sel->first[p];
    sel->idx = malloc((sel->first[nd] + 1) * sizeof *sel->idx);
    fill = malloc(((size_t)nd + 1) * sizeof *fill);
    if (!sel->idx || !fill)
        goto done;
    memcpy(fill, sel->first, (size_t)nd * sizeof *fill);
    for (size_t r = 0; r < t->n; r++)
        if (SELECTED(rows[r]))
            sel->idx[fill[c->dense[rows[r].phase]]++] = r;
#undef SELECTED
    rc = 0;
done:
    if (rc == 0 && dev_mask)
        for (int ph = 0; ph < TRACE_PHASE_COUNT; ph++)
            if (c->known[ph] >= 0 && dev[c->known[ph]])
                *dev_mask |= 1u << ph;
    free(dev);
    free(fill);
    return rc < 0 ? analysis_oom(t) : 0;
}

/* The step numbers of the rank's median (nearest-rank p50) and longest step range, for the
 * step drawing: rows idx[from .. from + m) of the step phase. */
static int analysis_rep_steps(const struct rank_sel *sel, size_t from, size_t m,
                              struct rank_stat *out)
{
    struct {
        int64_t dur, step;
    } *v = malloc((m + 1) * sizeof *v);
    if (!v)
        return analysis_oom(sel->t);
    for (size_t i = 0; i < m; i++) {
        const struct run_row *row = &sel->t->rows[sel->idx[from + i]];
        v[i].dur = row->end_ns - row->start_ns;
        v[i].step = row->step;
    }
    int rc = sort_by_i64(v, m, sizeof *v, 0);
    if (rc == 0) {
        size_t k = ((size_t)50 * m + 99) / 100; /* as analysis_percentile */
        out->median_step = (int)v[(k < 1 ? 1 : k) - 1].step;
        out->slowest_step = (int)v[m - 1].step;
    } else {
        error_wrap("%s", sel->t->path);
    }
    free(v);
    return rc;
}

/* Step 2, phase statistics (phases.csv), the step durations and the in-step time of the
 * chart's phase segments. */
static int analysis_phase_stats(const struct analysis_ctx *c, const struct rank_sel *sel,
                                struct rank_stat *out)
{
    static const enum trace_phase seg_phase[SEG_EXPOSED] = {
        [SEG_DATA] = TRACE_PHASE_DATA, [SEG_FORWARD] = TRACE_PHASE_FORWARD,
        [SEG_BACKWARD] = TRACE_PHASE_BACKWARD, [SEG_OPTIMIZER] = TRACE_PHASE_OPTIMIZER};
    const struct run_row *rows = sel->t->rows;
    const size_t *first = sel->first;
    int nd = c->ndense;
    size_t maxc = 0;
    for (int p = 0; p < nd; p++)
        if (first[p + 1] - first[p] > maxc)
            maxc = first[p + 1] - first[p];
    int64_t *dur = malloc((maxc + 1) * sizeof *dur);
    out->phases = calloc((size_t)nd + 1, sizeof *out->phases);
    if (!dur || !out->phases) {
        free(dur);
        return analysis_oom(sel->t);
    }
    int rc = 0;
    for (int p = 0; p < nd && rc == 0; p++) {
        size_t m = first[p + 1] - first[p];
        if (m == 0)
            continue;
        struct phase_stat *ps = &out->phases[out->nphases++];
        ps->phase = c->dense_label[p];
        ps->count = m;
        for (int ph = 0; ph < TRACE_PHASE_COUNT; ph++)
            if (c->known[ph] == p)
                ps->collective = trace_phase_collective(ph);
        for (size_t i = 0; i < m; i++) {
            const struct run_row *row = &rows[sel->idx[first[p] + i]];
            dur[i] = row->end_ns - row->start_ns;
            ps->total_ns += dur[i];
            ps->bytes = row->bytes < 0 || ps->bytes < 0 ? -1 : ps->bytes + row->bytes;
            if (row->step >= 1) {
                ps->in_steps_ns += dur[i];
                ps->in_steps = 1;
            }
        }
        if (sort_by_i64(dur, m, sizeof *dur, 0) < 0) {
            rc = error_wrap("%s", sel->t->path);
            break;
        }
        ps->mean_ns = analysis_mean_ns(ps->total_ns, m);
        ps->p50_ns = analysis_percentile(dur, m, 50);
        ps->p95_ns = analysis_percentile(dur, m, 95);
        ps->max_ns = dur[m - 1];
        if (p == c->known[TRACE_PHASE_STEP]) {
            out->step_ns = malloc(m * sizeof *out->step_ns);
            if (!out->step_ns) {
                rc = analysis_oom(sel->t);
                break;
            }
            memcpy(out->step_ns, dur, m * sizeof *dur);
            out->nsteps = m;
            out->step_total_ns = ps->total_ns;
            rc = analysis_rep_steps(sel, first[p], m, out);
        }
        for (int s = 0; s < SEG_EXPOSED; s++)
            if (p == c->known[seg_phase[s]])
                out->seg_ns[s] = ps->in_steps_ns;
    }
    free(dur);
    return rc;
}

/* The dense indices of the communication phases into mph (every collective, -1 where
 * absent) and of those that are not gradient buckets into held (the training thread's own
 * collectives: not compute); returns the count of each (the same). */
static int analysis_comm_phases(const struct analysis_ctx *c, int *mph, int *held)
{
    int n = 0;
    for (int ph = 0; ph < TRACE_PHASE_COUNT; ph++)
        if (trace_phase_collective(ph)) {
            mph[n] = c->known[ph];
            held[n++] = ph == TRACE_PHASE_ALLREDUCE ? -1 : c->known[ph];
        }
    return n;
}

/* C: forward, backward and optimizer less the time of the collectives other than the
 * gradient buckets (FORMULAS.md: a broadcast inside forward is communication, not
 * forward's compute).  0, or -1 after error_set(). */
static int analysis_compute_union(const struct analysis_ctx *c, const struct rank_sel *sel,
                                  struct ivl **out, size_t *n)
{
    const int *K = c->known;
    int cph[3] = {K[TRACE_PHASE_FORWARD], K[TRACE_PHASE_BACKWARD], K[TRACE_PHASE_OPTIMIZER]};
    int mph[TRACE_PHASE_COUNT], held[TRACE_PHASE_COUNT];
    int nh = analysis_comm_phases(c, mph, held);
    struct ivl *all = NULL, *h = NULL;
    size_t na = 0, nhv = 0;
    int rc = analysis_union(sel, cph, 3, &all, &na);
    if (rc == 0)
        rc = analysis_union(sel, held, nh, &h, &nhv);
    if (rc == 0 && nhv > 0) {
        struct ivl *d = malloc((na + nhv + 1) * sizeof *d);
        if (!d) {
            rc = analysis_oom(sel->t);
        } else {
            na = ivl_diff(all, na, h, nhv, d);
            free(all);
            all = d;
        }
    }
    free(h);
    if (rc < 0) {
        free(all);
        return rc;
    }
    *out = all;
    *n = na;
    return 0;
}

/* Step 3, overlap.csv: the unions C (compute), M (communication: every collective) and S
 * (steps), and from them exposed communication, idle time and the chart's last two
 * segments. */
static int analysis_overlap(const struct analysis_ctx *c, const struct rank_sel *sel,
                            struct rank_stat *out)
{
    int mph[TRACE_PHASE_COUNT], held[TRACE_PHASE_COUNT];
    int nmph = analysis_comm_phases(c, mph, held);
    int sph[1] = {c->known[TRACE_PHASE_STEP]};
    struct ivl *compute = NULL, *comm = NULL, *steps = NULL, *both = NULL;
    size_t nc = 0, nm = 0, ns = 0;
    int rc = analysis_compute_union(c, sel, &compute, &nc);
    if (rc == 0)
        rc = analysis_union(sel, mph, nmph, &comm, &nm);
    if (rc == 0)
        rc = analysis_union(sel, sph, 1, &steps, &ns);
    if (rc == 0 && !(both = malloc((nc + nm + 1) * sizeof *both)))
        rc = analysis_oom(sel->t);
    if (rc == 0) {
        size_t nu = ivl_union2(compute, nc, comm, nm, both);
        out->compute_ns = ivl_len(compute, nc);
        out->comm_ns = ivl_len(comm, nm);
        out->exposed_ns = analysis_exposed_ns(comm, nm, compute, nc);
        out->step_union_ns = ivl_len(steps, ns);
        out->idle_ns = analysis_idle_ns(steps, ns, both, nu);
        analysis_segments(out);
    }
    free(compute);
    free(comm);
    free(steps);
    free(both);
    return rc;
}

/* Step 4, buckets.csv: one entry per all-reduce row with its time and the part of it under
 * this rank's backward ranges. */
static int analysis_rank_buckets(const struct analysis_ctx *c, const struct rank_sel *sel,
                                 struct bucket_list *buckets)
{
    int ar = c->known[TRACE_PHASE_ALLREDUCE], bph[1] = {c->known[TRACE_PHASE_BACKWARD]};
    if (ar < 0)
        return 0;
    struct ivl *bwd = NULL;
    size_t nb = 0;
    if (analysis_union(sel, bph, 1, &bwd, &nb) < 0)
        return -1;
    int rc = 0;
    for (size_t i = sel->first[ar]; i < sel->first[ar + 1]; i++) {
        const struct run_row *row = &sel->t->rows[sel->idx[i]];
        if (row->bucket < 0)
            continue;
        if (VEC_RESERVE(buckets->v, buckets->cap, buckets->n + 1)) {
            rc = analysis_oom(sel->t);
            break;
        }
        struct bucket_entry *b = &buckets->v[buckets->n++];
        b->key = (int64_t)row->bucket * 4294967296LL + (uint32_t)row->step;
        b->dur_ns = row->end_ns - row->start_ns;
        b->hidden_ns = ivl_overlap_one(bwd, nb, row->start_ns, row->end_ns);
        b->bytes = row->bytes;
        b->start_ns = row->start_ns;
    }
    free(bwd);
    return rc;
}

/* One selected row of a collective phase, for numbering a rank's calls in each step. */
struct coll_call {
    int64_t start_ns, dur_ns;
    int32_t step, bucket;
};

/* Step 4b, run_stat.colls: one entry per row inside a step of each collective phase, keyed
 * by its index among this rank's calls of that phase in that step (in start order): ranks
 * issue collectives in the same order, so the k-th call of step s is the same collective on
 * every rank.  The gradient buckets' `allreduce` rows are keyed by their bucket instead (as
 * buckets.csv groups them; rows without a bucket are left out). */
static int analysis_rank_colls(const struct analysis_ctx *c, const struct rank_sel *sel,
                               int rk, struct coll_list *colls)
{
    int rc = 0;
    for (int ph = 0; ph < TRACE_PHASE_COUNT && rc == 0; ph++) {
        const int p = c->known[ph], grad = ph == TRACE_PHASE_ALLREDUCE;
        if (!trace_phase_collective(ph) || p < 0 || p >= (1 << 14))
            continue;
        const size_t m = sel->first[p + 1] - sel->first[p];
        struct coll_call *v = malloc((m + 1) * sizeof *v);
        if (!v)
            return analysis_oom(sel->t);
        size_t n = 0;
        int32_t maxstep = 0;
        for (size_t i = sel->first[p]; i < sel->first[p + 1]; i++) {
            const struct run_row *row = &sel->t->rows[sel->idx[i]];
            if (row->step < 1)
                continue; /* outside steps: eval's reduce, the setup's broadcast */
            if (grad && (row->bucket < 0 || row->bucket >= UINT16_MAX))
                continue;
            v[n++] = (struct coll_call){row->start_ns, row->end_ns - row->start_ns, row->step,
                                        row->bucket};
            if (row->step > maxstep)
                maxstep = row->step;
        }
        uint16_t *calls = n && !grad ? calloc((size_t)maxstep + 1, sizeof *calls) : NULL;
        if (n && !grad &&
            (!calls || sort_by_i64(v, n, sizeof *v, offsetof(struct coll_call, start_ns)) < 0))
            rc = calls ? error_wrap("%s", sel->t->path) : analysis_oom(sel->t);
        for (size_t i = 0; i < n && rc == 0; i++) {
            uint16_t k = (uint16_t)v[i].bucket;
            if (!grad) {
                k = calls[v[i].step];
                if (k == UINT16_MAX)
                    continue; /* 65535 calls of one phase in one step: the rest are not matched */
                calls[v[i].step]++;
            }
            if (VEC_RESERVE(colls->v, colls->cap, colls->n + 1)) {
                rc = analysis_oom(sel->t);
                break;
            }
            colls->v[colls->n++] = (struct coll_entry){
                (int64_t)p << 48 | (int64_t)k << 32 | (int64_t)(uint32_t)v[i].step, v[i].dur_ns,
                rk};
        }
        free(calls);
        free(v);
    }
    return rc;
}

/* Step 5, stragglers.csv: per step of this rank, the start of its step range and the end
 * of its last backward range (compute_r = ready_r - start_r). */
static int analysis_rank_steps(const struct analysis_ctx *c, const struct rank_sel *sel,
                               struct step_list *steps)
{
    int sph[1] = {c->known[TRACE_PHASE_STEP]}, bph[1] = {c->known[TRACE_PHASE_BACKWARD]};
    size_t m = 0;
    struct step_mark *marks =
        malloc((analysis_count(sel, sph, 1) + analysis_count(sel, bph, 1) + 1) * sizeof *marks);
    if (!marks)
        return analysis_oom(sel->t);
    for (int k = 0; k < 2; k++) {
        int p = k == 0 ? sph[0] : bph[0];
        if (p < 0)
            continue;
        for (size_t i = sel->first[p]; i < sel->first[p + 1]; i++) {
            const struct run_row *row = &sel->t->rows[sel->idx[i]];
            if (row->step < 1)
                continue;
            marks[m].step = row->step;
            marks[m].is_ready = k;
            marks[m].t_ns = k == 0 ? row->start_ns : row->end_ns;
            m++;
        }
    }
    int rc = 0;
    if (sort_by_i64(marks, m, sizeof *marks, offsetof(struct step_mark, step)) < 0)
        rc = error_wrap("%s", sel->t->path);
    for (size_t i = 0; i < m && rc == 0;) {
        size_t j = i;
        int has_start = 0, has_ready = 0;
        int64_t start = 0, ready = 0;
        for (; j < m && marks[j].step == marks[i].step; j++) {
            if (!marks[j].is_ready && (!has_start || marks[j].t_ns < start)) {
                start = marks[j].t_ns;
                has_start = 1;
            }
            if (marks[j].is_ready && (!has_ready || marks[j].t_ns > ready)) {
                ready = marks[j].t_ns;
                has_ready = 1;
            }
        }
        if (has_start && has_ready) {
            if (VEC_RESERVE(steps->v, steps->cap, steps->n + 1)) {
                rc = analysis_oom(sel->t);
                break;
            }
            struct step_entry *e = &steps->v[steps->n++];
            e->step = (int32_t)marks[i].step;
            e->rank = sel->t->rank;
            e->key = (int64_t)e->step * 4294967296LL + sel->t->rank;
            e->compute_ns = ready - start;
            e->ready_ns = ready;
        }
        i = j;
    }
    free(marks);
    return rc;
}

/* Step 6, overlap.csv's kernel columns: an import swept its device activity as it was read;
 * a ddpprof run has CUPTI rows (kernel, memcpy, memset; no launch times), swept here in
 * start order. */
static int analysis_rank_kernels(const struct analysis_ctx *c, const struct rank_trace *t,
                                 struct rank_stat *out)
{
    if (t->has_kernels) {
        out->kern = t->kern;
        out->has_kern = t->kern.count > 0;
        return 0;
    }
    struct dev_act {
        int64_t start, end, cls;
    } *v = NULL;
    size_t n = 0, cap = 0;
    for (size_t r = 0; r < t->n; r++) {
        const struct run_row *row = &t->rows[r];
        int k = 0;
        while (k < 3 && (c->device_kind[k] == STRPOOL_NONE || row->kind != c->device_kind[k]))
            k++;
        if (k == 3)
            continue;
        if (VEC_RESERVE(v, cap, n + 1)) {
            free(v);
            return analysis_oom(t);
        }
        const char *name = strpool_get(&c->rs->names, row->name);
        v[n].start = row->start_ns;
        v[n].end = row->end_ns;
        v[n].cls = k > 0                            ? KERNEL_MEMORY
                   : strncmp(name, "nccl", 4) == 0 ? KERNEL_COMM
                                                    : KERNEL_COMPUTE;
        n++;
    }
    int rc = 0;
    if (n > 0) {
        if (sort_by_i64(v, n, sizeof *v, 0) < 0) {
            rc = error_wrap("%s", t->path);
        } else {
            memset(&out->kern, 0, sizeof out->kern);
            for (size_t i = 0; i < n; i++)
                kernel_sweep_add(&out->kern, v[i].start, v[i].end,
                                    (enum kernel_class)v[i].cls, -1);
            (void)kernel_sweep_finish(&out->kern); /* no streams: cannot fail */
            out->has_kern = 1;
        }
    }
    free(v);
    return rc;
}

/* ---- warm-up steps (FORMULAS.md "Warm-up steps") ---- */

int analysis_warmup_detect(const int64_t *dur, size_t n)
{
    size_t cap = n / 4;
    if (cap > ANALYSIS_WARMUP_CAP)
        cap = ANALYSIS_WARMUP_CAP;
    for (size_t w = 0; w < cap; w++) {
        size_t k = n - (w + 1);
        if (k > ANALYSIS_WARMUP_NEXT)
            k = ANALYSIS_WARMUP_NEXT;
        if (k == 0)
            return (int)w;
        int64_t next[ANALYSIS_WARMUP_NEXT];
        for (size_t i = 0; i < k; i++) { /* insertion sort of at most 5 */
            size_t j = i;
            for (; j > 0 && next[j - 1] > dur[w + 1 + i]; j--)
                next[j] = next[j - 1];
            next[j] = dur[w + 1 + i];
        }
        if ((double)dur[w] <= (1.0 + ANALYSIS_WARMUP_TOL) * (double)next[(k - 1) / 2])
            return (int)w;
    }
    return (int)cap;
}

/* The warm-up of run r into *w: the step ranges (step >= 1) of its lowest rank that has
 * any -- on the device clock where that rank has device step rows, else the host's -- in
 * step order; request steps (ANALYSIS_WARMUP_AUTO: analysis_warmup_detect), at most all
 * but the last.  0, or -1 after error_set(). */
static int analysis_find_warmup(const struct analysis_ctx *c, const struct run *r, int request,
                                struct warmup_stat *w)
{
    memset(w, 0, sizeof *w);
    w->first_ns = -1;
    int sp = c->known[TRACE_PHASE_STEP];
    if (sp < 0)
        return 0;
    for (int k = 0; k < r->nranks; k++) {
        const struct rank_trace *t = &r->ranks[k];
        int dev = 0;
        size_t m = 0;
        for (size_t i = 0; i < t->n; i++) {
            const struct run_row *row = &t->rows[i];
            if (row->kind == c->range_kind && c->dense[row->phase] == sp && row->step >= 1) {
                m++;
                dev |= row->clock == TRACE_CLOCK_DEVICE;
            }
        }
        if (m == 0)
            continue;
        struct {
            int64_t step, dur;
        } *v = malloc(m * sizeof *v);
        if (!v)
            return analysis_oom(t);
        m = 0;
        for (size_t i = 0; i < t->n; i++) {
            const struct run_row *row = &t->rows[i];
            if (row->kind == c->range_kind && c->dense[row->phase] == sp && row->step >= 1 &&
                (row->clock == TRACE_CLOCK_DEVICE) == dev) {
                v[m].step = row->step;
                v[m].dur = row->end_ns - row->start_ns;
                m++;
            }
        }
        int64_t *dur = malloc(m * sizeof *dur);
        if (!dur || sort_by_i64(v, m, sizeof *v, 0) < 0) {
            free(v);
            free(dur);
            return dur ? error_wrap("%s", t->path) : analysis_oom(t);
        }
        for (size_t i = 0; i < m; i++)
            dur[i] = v[i].dur;
        int n = request == ANALYSIS_WARMUP_AUTO ? analysis_warmup_detect(dur, m) : request;
        if (n > (int)m - 1)
            n = (int)m - 1;
        w->steps = n;
        w->last_step = n > 0 ? (int)v[n - 1].step : 0;
        w->detected = request == ANALYSIS_WARMUP_AUTO;
        w->first_ns = dur[0];
        w->first_step = (int)v[0].step;
        free(v);
        free(dur);
        return 0;
    }
    return 0;
}

/* ---- repeats (FORMULAS.md "Repeats") ---- */

void analysis_spread(double *v, size_t n, struct spread *out)
{
    qsort(v, n, sizeof *v, sort_cmp_double);
    out->min = v[0];
    out->max = v[n - 1];
    out->median = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Leave the warm-up steps' rows (1 <= step <= c->warmup_last) out of sel; the time of the
 * step ranges left out goes to out->warmup_step_ns (train_s still counts it). */
static void analysis_skip_warmup(const struct analysis_ctx *c, struct rank_sel *sel,
                                 struct rank_stat *out)
{
    if (c->warmup_last < 1)
        return;
    const struct run_row *rows = sel->t->rows;
    size_t at = 0, from = sel->first[0];
    for (int p = 0; p < c->ndense; p++) {
        size_t end = sel->first[p + 1];
        sel->first[p] = at;
        for (size_t i = from; i < end; i++) {
            const struct run_row *row = &rows[sel->idx[i]];
            if (row->step >= 1 && row->step <= c->warmup_last) {
                if (p == c->known[TRACE_PHASE_STEP]) {
                    out->warmup_step_ns += row->end_ns - row->start_ns;
                    out->warmup_nsteps++;
                }
                continue;
            }
            sel->idx[at++] = sel->idx[i];
        }
        from = end;
    }
    sel->first[c->ndense] = at;
}

/* Per phase statistics, overlap figures, bucket rows, step marks and kernel figures of one
 * rank. */
/* comm_cpu_ms / comm_cpu_bwd_ms: the median of the kind cpu rows' bytes (the others' CPU
 * ns) of phase step / backward over the counted steps (past the warm-up) */
static int analysis_comm_cpu(const struct analysis_ctx *c, const struct rank_trace *t,
                             struct rank_stat *out)
{
    if (c->cpu_kind == STRPOOL_NONE)
        return 0;
    const uint32_t step = strpool_find(&c->rs->labels, trace_phase_name(TRACE_PHASE_STEP));
    const uint32_t bwd = strpool_find(&c->rs->labels, trace_phase_name(TRACE_PHASE_BACKWARD));
    double *v[3];
    size_t n[3] = {0, 0, 0};
    for (int k = 0; k < 3; k++)
        v[k] = malloc((t->n + 1) * sizeof(double));
    if (!v[0] || !v[1] || !v[2]) {
        for (int k = 0; k < 3; k++)
            free(v[k]);
        return analysis_oom(t);
    }
    for (size_t i = 0; i < t->n; i++) {
        const struct run_row *row = &t->rows[i];
        if (row->kind != c->cpu_kind || row->step < 1 || row->step <= c->warmup_last)
            continue;
        if (row->phase == step)
            v[0][n[0]++] = (double)row->bytes;
        else if (row->phase == bwd) {
            v[1][n[1]++] = (double)row->bytes;
            v[2][n[2]++] = (double)(row->end_ns - row->start_ns);
        }
    }
    struct spread sp;
    if ((out->has_comm_cpu = n[0] > 0)) {
        analysis_spread(v[0], n[0], &sp);
        out->comm_cpu_ns = sp.median;
    }
    if ((out->has_comm_cpu_bwd = n[1] > 0)) {
        analysis_spread(v[1], n[1], &sp);
        out->comm_cpu_bwd_ns = sp.median;
        analysis_spread(v[2], n[2], &sp);
        out->comm_cpu_bwd_span_ns = sp.median;
    }
    for (int k = 0; k < 3; k++)
        free(v[k]);
    return 0;
}

static int analysis_rank(const struct analysis_ctx *c, const struct rank_trace *t, int rk,
                         struct rank_stat *out, struct bucket_list *buckets,
                         struct step_list *steps, struct coll_list *colls)
{
    struct rank_sel sel = {0};
    out->rank = t->rank;
    out->median_step = out->slowest_step = -1;
    struct rank_trace view;
    struct run_row *derived_rows;
    unsigned derived;
    int rc = analysis_cupti_ranges(c, t, &view, &derived_rows, &derived);
    if (rc == 0)
        rc = analysis_select(c, &view, &sel, &out->device_phases);
    /* the step drawing (stepview.c) reads the trace's own rows: it keeps the host rows of
     * the phases timed from CUPTI rows */
    out->device_phases &= ~derived;
    if (rc == 0)
        analysis_skip_warmup(c, &sel, out);
    if (rc == 0)
        rc = analysis_phase_stats(c, &sel, out);
    if (rc == 0)
        rc = analysis_overlap(c, &sel, out);
    if (rc == 0)
        rc = analysis_rank_buckets(c, &sel, buckets);
    if (rc == 0)
        rc = analysis_rank_colls(c, &sel, rk, colls);
    if (rc == 0)
        rc = analysis_rank_steps(c, &sel, steps);
    if (rc == 0)
        rc = analysis_rank_kernels(c, t, out);
    if (rc == 0)
        rc = analysis_comm_cpu(c, t, out);
    free(sel.first);
    free(sel.idx);
    free(derived_rows);
    return rc;
}

void analysis_load(const struct run *r, struct run_load *out)
{
    memset(out, 0, sizeof *out);
    double wall, busy, mine, steal, cores = 0.0;
    const struct run_meta *m = &r->meta;
    if (meta_finite(&m->host_cores, &cores) && cores >= 1 && cores < 1e6)
        out->cores = (int)cores;
    out->has_load = meta_finite(&m->host_load_start, &out->load_start);
    if (!meta_finite(&m->host_load_end, &out->load_end))
        out->load_end = -1.0;
    int timed = meta_finite(&m->wall_s, &wall) && wall > 0.0;
    if (timed && meta_finite(&m->host_busy_s, &busy) && meta_finite(&m->ranks_cpu_s, &mine)) {
        out->has_other = 1;
        out->other_cores = (busy - mine) / wall;
        if (out->other_cores < 0.0) /* tick granularity: a little of ours counted twice */
            out->other_cores = 0.0;
    }
    if (timed && out->cores && meta_finite(&m->host_steal_s, &steal) && steal >= 0.0) {
        out->has_steal = 1;
        out->steal = steal / (wall * out->cores);
    }
    out->loaded = (out->has_other && out->other_cores >= ANALYSIS_LOADED_CORES) ||
                  (out->has_steal && out->steal >= ANALYSIS_LOADED_STEAL) ||
                  (!out->has_other && out->has_load && out->cores &&
                   out->load_start > out->cores);
}

int analysis_oversubscribed(const struct run *r, int *ranks, int *cores)
{
    const struct meta_value *c = &r->meta.host_cores, *n = &r->meta.local_world_size;
    if (!n->s)
        n = &r->meta.world_size;
    if (!meta_is(&r->meta.device, "cpu") || !c->s || !n->s)
        return 0;
    *ranks = (int)n->i;
    *cores = (int)c->i;
    return *cores > 0 && *ranks > *cores;
}

/* One collective's rows e[0..n) (one per rank): the starts' spread is its skew.  (Its
 * transfer and sync wait come from the one per-call matching, analysis_colls.) */
static void analysis_collective(const struct bucket_entry *e, size_t n, struct bucket_stat *b)
{
    int64_t first = e[0].start_ns, last = e[0].start_ns;
    for (size_t k = 1; k < n; k++) {
        if (e[k].start_ns < first)
            first = e[k].start_ns;
        if (e[k].start_ns > last)
            last = e[k].start_ns;
    }
    b->collectives++;
    if (n >= 2) {
        b->skewed++;
        b->skew_ns += last - first;
    }
}

static int analysis_buckets(struct run_stat *st, struct bucket_list *g)
{
    struct bucket_entry *e = g->v;
    if (sort_by_i64(e, g->n, sizeof *e, offsetof(struct bucket_entry, key)) < 0)
        return error_wrap("%s", st->run->dir);
#define BUCKET_OF(x) ((int)((x).key >> 32))
    size_t nb = 0;
    for (size_t i = 0; i < g->n; i++)
        nb += i == 0 || BUCKET_OF(e[i]) != BUCKET_OF(e[i - 1]);
    st->buckets = calloc(nb + 1, sizeof *st->buckets);
    if (!st->buckets)
        return error_set("%s: out of memory for %zu buckets", st->run->dir, nb);
    for (size_t i = 0; i < g->n;) {
        if (i == 0 || BUCKET_OF(e[i]) != BUCKET_OF(e[i - 1])) {
            st->buckets[st->nbuckets].bucket = BUCKET_OF(e[i]);
            st->buckets[st->nbuckets++].bytes = -1;
        }
        struct bucket_stat *b = &st->buckets[st->nbuckets - 1];
        size_t j = i;
        for (; j < g->n && e[j].key == e[i].key; j++) {
            b->count++;
            b->total_ns += e[j].dur_ns;
            b->hidden_ns += e[j].hidden_ns;
            if (e[j].bytes > b->bytes)
                b->bytes = e[j].bytes;
        }
        analysis_collective(&e[i], j - i, b);
        i = j;
    }
#undef BUCKET_OF
    for (size_t i = 0; i < st->nbuckets; i++) {
        struct bucket_stat *b = &st->buckets[i];
        const struct meta_value *bytes = meta_at(&st->run->meta.bucket_bytes, b->bucket),
                                *params = meta_at(&st->run->meta.bucket_params, b->bucket);
        if (bytes)
            b->bytes = bytes->i;
        b->params = params ? params->i : -1;
    }
    return 0;
}

/* The phase_stat of label id phase on rank stat r, or NULL. */
static struct phase_stat *analysis_rank_phase(struct rank_stat *r, uint32_t phase)
{
    for (int p = 0; p < r->nphases; p++)
        if (r->phases[p].phase == phase)
            return &r->phases[p];
    return NULL;
}

/* The bucket_stat of bucket id bucket (st->buckets ascending), or NULL. */
static struct bucket_stat *analysis_bucket_of(struct run_stat *st, int bucket)
{
    size_t lo = 0, hi = st->nbuckets;
    while (lo < hi) {
        const size_t mid = lo + (hi - lo) / 2;
        if (st->buckets[mid].bucket < bucket)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < st->nbuckets && st->buckets[lo].bucket == bucket ? &st->buckets[lo] : NULL;
}

/* The step_stat of step number step, or -1 (steps with fewer than 2 ranks have none). */
static long analysis_step_index(const struct run_stat *st, int step)
{
    size_t lo = 0, hi = st->nsteps;
    while (lo < hi) {
        const size_t mid = lo + (hi - lo) / 2;
        if (st->steps[mid].step < step)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < st->nsteps && st->steps[lo].step == step ? (long)lo : -1;
}

/* run_stat.colls from every rank's calls e[0..n), per phase (report/FORMULAS.md
 * "phases.csv"): each call's shortest duration over the ranks is its transfer, the rest of
 * each row its wait for the last rank to arrive -- the rank with that shortest duration
 * (the lowest rank index on a tie), counted where the call has a wait.  Sets every rank's
 * phase_stat transfer_ns, wait_ns, late_rank and late_share (runs with >= 2 ranks), and,
 * for the collectives outside the gradient buckets, each step_stat's coll_wait_ns and
 * coll_late_rank (analysis_steps first). */
static int analysis_colls(const struct analysis_ctx *c, struct run_stat *st, struct coll_list *g)
{
    struct coll_entry *e = g->v;
    const int nr = st->nranks;
    for (size_t i = 0; i < st->nsteps; i++)
        st->steps[i].coll_late_rank = -1;
    if (g->n == 0)
        return 0;
    if (sort_by_i64(e, g->n, sizeof *e, offsetof(struct coll_entry, key)) < 0)
        return error_wrap("%s", st->run->dir);
    size_t np = 0;
    for (size_t i = 0; i < g->n; i++)
        np += i == 0 || e[i].key >> 48 != e[i - 1].key >> 48;
    struct phase_stat **ps = calloc((size_t)nr + 1, sizeof *ps);
    size_t *late = calloc((size_t)nr + 1, sizeof *late);
    int64_t *sw = calloc(st->nsteps * (size_t)nr + 1, sizeof *sw); /* step x late rank */
    st->colls = calloc(np + 1, sizeof *st->colls);
    if (!ps || !late || !sw || !st->colls) {
        free(ps);
        free(late);
        free(sw);
        return error_set("%s: out of memory for %zu collectives", st->run->dir, np);
    }
    for (size_t i = 0; i < g->n;) { /* one phase: e[i..end) */
        const int dense = (int)(e[i].key >> 48);
        size_t end = i;
        while (end < g->n && (int)(e[end].key >> 48) == dense)
            end++;
        struct coll_stat *cs = &st->colls[st->ncolls++];
        cs->phase = c->dense_label[dense];
        for (int ph = 0; ph < TRACE_PHASE_COUNT; ph++)
            if (c->known[ph] == dense) {
                cs->collective = trace_phase_collective(ph);
                cs->grad = ph == TRACE_PHASE_ALLREDUCE;
            }
        memset(late, 0, (size_t)nr * sizeof *late);
        for (int k = 0; k < nr; k++)
            ps[k] = nr >= 2 ? analysis_rank_phase(&st->ranks[k], cs->phase) : NULL;
        while (i < end) { /* one call: e[i..j) */
            size_t j = i, last = i;
            int64_t sum = 0;
            for (; j < end && e[j].key == e[i].key; j++) {
                sum += e[j].dur_ns;
                if (e[j].dur_ns < e[last].dur_ns ||
                    (e[j].dur_ns == e[last].dur_ns && e[j].rk < e[last].rk))
                    last = j;
            }
            const int64_t transfer = e[last].dur_ns, wait = sum - (int64_t)(j - i) * transfer;
            if (cs->grad) { /* buckets.csv's transfer and sync wait of this bucket */
                struct bucket_stat *b = analysis_bucket_of(st, (int)((e[i].key >> 32) & 0xFFFF));
                if (b) {
                    b->transfer_ns += transfer;
                    b->wait_ns += wait;
                }
            }
            cs->calls++;
            cs->rows += j - i;
            cs->total_ns += sum;
            cs->transfer_ns += transfer;
            cs->wait_ns += wait;
            for (size_t q = i; q < j; q++)
                if (ps[e[q].rk]) {
                    ps[e[q].rk]->has_xfer = 1;
                    ps[e[q].rk]->transfer_ns += transfer;
                    ps[e[q].rk]->wait_ns += e[q].dur_ns - transfer;
                }
            if (j - i >= 2) {
                cs->multi++;
                if (wait > 0) {
                    late[e[last].rk]++;
                    const long s = cs->grad ? -1 : analysis_step_index(st, (int)(uint32_t)e[i].key);
                    if (s >= 0)
                        sw[(size_t)s * (size_t)nr + (size_t)e[last].rk] += wait;
                }
            }
            i = j;
        }
        int top = -1;
        for (int k = 0; k < nr; k++)
            if (late[k] > 0 && (top < 0 || late[k] > late[top]))
                top = k;
        cs->late_rank = top >= 0 ? st->ranks[top].rank : -1;
        cs->late_calls = top >= 0 ? late[top] : 0;
        for (int k = 0; k < nr; k++)
            if (ps[k]) {
                ps[k]->late_rank = cs->late_rank;
                ps[k]->late_share = cs->multi ? (double)cs->late_calls / (double)cs->multi : 0.0;
            }
    }
    for (size_t s = 0; s < st->nsteps; s++) {
        const int64_t *w = &sw[s * (size_t)nr];
        int top = -1;
        for (int k = 0; k < nr; k++) {
            st->steps[s].coll_wait_ns += w[k];
            if (w[k] > 0 && (top < 0 || w[k] > w[top]))
                top = k;
        }
        st->steps[s].coll_late_rank = top >= 0 ? st->ranks[top].rank : -1;
    }
    free(ps);
    free(late);
    free(sw);
    return 0;
}

static int analysis_steps(struct run_stat *st, struct step_list *g)
{
    struct step_entry *e = g->v;
    if (sort_by_i64(e, g->n, sizeof *e, offsetof(struct step_entry, key)) < 0)
        return error_wrap("%s", st->run->dir);
    st->steps = calloc(g->n + 1, sizeof *st->steps);
    if (!st->steps)
        return error_set("%s: out of memory for %zu steps", st->run->dir, g->n);
    for (size_t i = 0; i < g->n;) {
        size_t j = i;
        while (j < g->n && e[j].step == e[i].step)
            j++;
        if (j - i >= 2) /* steps with fewer than 2 ranks are left out */
            analysis_straggler(&e[i], j - i, &st->steps[st->nsteps++]);
        i = j;
    }
    return 0;
}

int analysis_baseline(const struct runset *rs)
{
    for (int i = 0; i < rs->n; i++)
        if (run_mode_is(&rs->runs[i], "baseline"))
            return i;
    for (int i = 0; i < rs->n; i++)
        if (rs->runs[i].world_size == 1)
            return i;
    return -1;
}

const char *const analysis_basis_names[] = {
    [ANALYSIS_BASIS_NONE] = "",
    [ANALYSIS_BASIS_STEADY] = "steady",
    [ANALYSIS_BASIS_WHOLE_RUN] = "whole_run",
    [ANALYSIS_BASIS_WALL] = "wall",
};

/* The images of the steady steps (after the warm-up): metrics.csv's rows of those steps
 * where it names its steps, else the run's images x steady steps / all its steps (every
 * step taken as carrying the same batch).  0 when unknown. */
static int64_t analysis_steady_images(const struct run_stat *st)
{
    const struct run *r = st->run;
    const struct rank_stat *k = &st->ranks[0];
    if (r->has_metrics && r->metrics_nrows > 0) {
        int64_t n = 0;
        for (size_t i = 0; i < r->metrics_nrows; i++)
            if (r->metrics_rows[i].step > st->warmup.last_step)
                n += r->metrics_rows[i].images;
        return n;
    }
    const double all = (double)(k->nsteps + k->warmup_nsteps);
    return all > 0 ? (int64_t)((double)st->images * (double)k->nsteps / all + 0.5) : 0;
}

/* The whole run: images over every step's time (train_s), or over wall_s without step
 * ranges. */
static void analysis_whole_run(struct run_stat *st)
{
    const struct run *r = st->run;
    st->has_wall = r->meta.wall_s.s != NULL;
    if (st->has_wall)
        st->wall_s = r->meta.wall_s.d;
    if (r->has_metrics) {
        st->images = r->metrics_images;
        st->has_images = 1;
    } else if (r->meta.train_samples.s && r->meta.epochs.s) {
        st->images = (int64_t)(r->meta.train_samples.d * r->meta.epochs.d);
        st->has_images = 1;
    }
    if (st->nranks > 0 && st->ranks[0].nsteps > 0) {
        /* every step, the warm-up too: the images count every step */
        st->train_s = (double)(st->ranks[0].step_total_ns + st->ranks[0].warmup_step_ns) * 1e-9;
        st->has_train = 1;
    } else if (st->has_wall) {
        st->train_s = st->wall_s;
        st->has_train = 1;
        st->train_from_wall = 1;
        if (st->nranks > 0)
            report_warn("%s: no step ranges in the traces: train_s is wall_s", r->dir);
    }
    /* rank 0's trace stopped early (run.h cut): its step time is not the run's */
    if (st->has_images && st->has_train && st->train_s > 0 &&
        !(r->nranks > 0 && r->ranks[0].cut && !st->train_from_wall)) {
        st->images_per_s_whole = analysis_images_per_s(st->images, st->train_s);
        st->has_ips_whole = 1;
        st->basis_whole = st->train_from_wall ? ANALYSIS_BASIS_WALL : ANALYSIS_BASIS_WHOLE_RUN;
    }
}

/* images_per_s: the steady state's (rank 0's steps after the warm-up), else the whole
 * run's. */
static void analysis_throughput(struct run_stat *st)
{
    analysis_whole_run(st);
    if (st->has_ips_whole && !st->train_from_wall) {
        const struct rank_stat *k = &st->ranks[0];
        st->steady_steps = k->nsteps;
        st->steady_s = (double)k->step_total_ns * 1e-9;
        st->steady_images = analysis_steady_images(st);
        st->has_steady = st->steady_images > 0 && st->steady_s > 0;
    }
    if (st->has_steady) {
        st->images_per_s = analysis_images_per_s(st->steady_images, st->steady_s);
        st->has_ips = 1;
        st->basis = ANALYSIS_BASIS_STEADY;
    } else if (st->has_ips_whole) {
        st->images_per_s = st->images_per_s_whole;
        st->has_ips = 1;
        st->basis = st->basis_whole;
        if (!st->train_from_wall)
            report_warn("%s: no steady-state steps to count images on: images_per_s and "
                        "speedup are the whole run's (speedup.csv basis)",
                        st->run->dir);
    }
}

/* The whole-run speedup of s against base: images/s over the baseline's, both on train_s
 * when both have step ranges, else both on wall_s.  1 and *speedup set, or 0. */
static int analysis_speedup_whole(const struct run_stat *s, const struct run_stat *base,
                                  double *speedup, enum analysis_basis *basis)
{
    double ips = 0, ips_base = 0;
    if (s->has_ips_whole && base->has_ips_whole && !s->train_from_wall &&
        !base->train_from_wall) {
        ips = s->images_per_s_whole;
        ips_base = base->images_per_s_whole;
        *basis = ANALYSIS_BASIS_WHOLE_RUN;
    } else if (s->has_images && base->has_images && s->has_wall && base->has_wall &&
               s->wall_s > 0 && base->wall_s > 0) {
        ips = analysis_images_per_s(s->images, s->wall_s);
        ips_base = analysis_images_per_s(base->images, base->wall_s);
        *basis = ANALYSIS_BASIS_WALL;
    }
    if (!(ips > 0 && ips_base > 0))
        return 0;
    *speedup = analysis_speedup(ips, ips_base);
    return 1;
}

/* speedup and efficiency of every run against the baseline: steady images/s over the
 * baseline's where both have a steady state, else the whole run's; the whole run's beside
 * them (_whole). */
static void analysis_against_baseline(const struct runset *rs, struct run_stat *st)
{
    int b = analysis_baseline(rs);
    if (b < 0) {
        if (rs->n > 1)
            report_warn("no baseline run (mode baseline or world_size 1): speedup and "
                        "efficiency left empty");
        return;
    }
    const struct run_stat *base = &st[b];
    for (int i = 0; i < rs->n; i++) {
        struct run_stat *s = &st[i];
        const int world = s->run->world_size;
        if (analysis_speedup_whole(s, base, &s->speedup_whole, &s->basis_whole)) {
            s->efficiency_whole = analysis_efficiency(s->speedup_whole, world);
            s->has_speedup_whole = 1;
        }
        if (s->has_steady && base->has_steady) {
            s->speedup = analysis_speedup(s->images_per_s, base->images_per_s);
            s->basis = ANALYSIS_BASIS_STEADY;
        } else if (s->has_speedup_whole) {
            s->speedup = s->speedup_whole;
            s->basis = s->basis_whole;
            if (s->has_steady && i != b)
                report_warn("%s: the baseline %s has no steady-state steps: the speedup of %s "
                            "is the whole run's (speedup.csv basis %s)",
                            s->run->dir, base->run->label, s->run->label,
                            analysis_basis_names[s->basis]);
        } else {
            continue;
        }
        s->efficiency = analysis_efficiency(s->speedup, world);
        s->has_speedup = 1;
    }
}

struct run_stat *analysis_run(const struct runset *rs)
{
    return analysis_run_warmup(rs, ANALYSIS_WARMUP_AUTO);
}

struct run_stat *analysis_run_warmup(const struct runset *rs, int warmup_steps)
{
    struct analysis_ctx c;
    if (analysis_ctx_init(&c, rs) < 0) {
        analysis_ctx_free(&c);
        return NULL;
    }
    struct run_stat *st = calloc((size_t)rs->n + 1, sizeof *st);
    if (!st) {
        analysis_ctx_free(&c);
        error_set("report: out of memory for %d runs", rs->n);
        return NULL;
    }
    int rc = 0;
    for (int i = 0; i < rs->n && rc == 0; i++) {
        const struct run *r = &rs->runs[i];
        struct run_stat *s = &st[i];
        s->run = r;
        s->ranks = calloc((size_t)r->nranks + 1, sizeof *s->ranks);
        if (!s->ranks) {
            rc = error_set("%s: out of memory for %d ranks", r->dir, r->nranks);
            break;
        }
        s->nranks = r->nranks;
        rc = analysis_find_warmup(&c, r, warmup_steps, &s->warmup);
        c.warmup_last = s->warmup.last_step;
        c.gpu_run = meta_is(&r->meta.device, "cuda");
        struct bucket_list buckets = {0};
        struct step_list steps = {0};
        struct coll_list colls = {0};
        for (int k = 0; k < r->nranks && rc == 0; k++)
            rc = analysis_rank(&c, &r->ranks[k], k, &s->ranks[k], &buckets, &steps, &colls);
        if (rc == 0)
            rc = analysis_buckets(s, &buckets);
        if (rc == 0)
            rc = analysis_steps(s, &steps);
        if (rc == 0)
            rc = analysis_colls(&c, s, &colls);
        free(colls.v);
        free(buckets.v);
        free(steps.v);
        analysis_throughput(s);
        for (int k = 0; k < s->nranks && s->nrep == 0; k++)
            if (s->ranks[k].median_step >= 0) {
                s->rep_steps[s->nrep++] = s->ranks[k].median_step;
                if (s->ranks[k].slowest_step != s->ranks[k].median_step)
                    s->rep_steps[s->nrep++] = s->ranks[k].slowest_step;
            }
    }
    analysis_ctx_free(&c);
    if (rc < 0) {
        analysis_free(st, rs->n);
        return NULL;
    }
    analysis_against_baseline(rs, st);
    return st;
}

void analysis_free(struct run_stat *st, int n)
{
    if (!st)
        return;
    for (int i = 0; i < n; i++) {
        for (int k = 0; k < st[i].nranks; k++) {
            free(st[i].ranks[k].phases);
            free(st[i].ranks[k].step_ns);
        }
        free(st[i].ranks);
        free(st[i].buckets);
        free(st[i].colls);
        free(st[i].steps);
    }
    free(st);
}
