/* ops_view.c — ops.csv and the top-N tables (see ops_view.h and report/FORMULAS.md
 * "ops.csv"). */
#include "report/output/ops_view.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/error.h"
#include "report/input/ops.h"

enum { OA_RUN, OA_RANK, OA_KIND, OA_TYPE, OA_NAME, OA_CALLS, OA_TOTAL, OA_SELF, OA_MEAN,
       OA_MIN, OA_MAX, OA_SHARE, OA_NCOLS };
static const struct table_col all_cols[OA_NCOLS] = {
    [OA_RUN] = {"run", "run", "", 1},
    [OA_RANK] = {"rank", "rank", "", 0},
    [OA_KIND] = {"kind", "kind", "", 1},
    [OA_TYPE] = {"kernel_type", "type", "", 1},
    [OA_NAME] = {"name", "name", "", 1},
    [OA_CALLS] = {"calls", "calls", "", 0},
    [OA_TOTAL] = {"total_us", "total", "us", 0},
    [OA_SELF] = {"self_us", "self", "us", 0},
    [OA_MEAN] = {"mean_us", "mean", "us", 0},
    [OA_MIN] = {"min_us", "min", "us", 0},
    [OA_MAX] = {"max_us", "max", "us", 0},
    [OA_SHARE] = {"share_pct", "share", "%", 0},
};

enum { OC_RUN, OC_RANK, OC_NAME, OC_CALLS, OC_SELF, OC_TOTAL, OC_SHARE, OC_NCOLS };
static const struct table_col cpu_cols[OC_NCOLS] = {
    [OC_RUN] = {"run", "run", "", 1},
    [OC_RANK] = {"rank", "rank", "", 0},
    [OC_NAME] = {"name", "op", "", 1},
    [OC_CALLS] = {"calls", "calls", "", 0},
    [OC_SELF] = {"self_us", "self", "us", 0},
    [OC_TOTAL] = {"total_us", "total", "us", 0},
    [OC_SHARE] = {"share_pct", "self share", "%", 0},
};

enum { OK_RUN, OK_RANK, OK_TYPE, OK_NAME, OK_CALLS, OK_TOTAL, OK_MEAN, OK_SHARE, OK_NCOLS };
static const struct table_col kernel_cols[OK_NCOLS] = {
    [OK_RUN] = {"run", "run", "", 1},
    [OK_RANK] = {"rank", "rank", "", 0},
    [OK_TYPE] = {"kernel_type", "type", "", 1},
    [OK_NAME] = {"name", "kernel", "", 1},
    [OK_CALLS] = {"calls", "calls", "", 0},
    [OK_TOTAL] = {"total_us", "total", "us", 0},
    [OK_MEAN] = {"mean_us", "mean", "us", 0},
    [OK_SHARE] = {"share_pct", "share of type", "%", 0},
};

void ops_tables_init(struct ops_tables *o)
{
    table_init(&o->all, "ops: time per operator and per kernel name, per rank", "ops.csv",
               all_cols, OA_NCOLS);
    table_init(&o->cpu, "ops: the CPU ops with the most self time, per rank (all in ops.csv)",
               "ops.csv", cpu_cols, OC_NCOLS);
    table_init(&o->kernel, "kernels: the kernels with the most time, per rank (all in ops.csv)",
               "ops.csv", kernel_cols, OK_NCOLS);
}

void ops_tables_free(struct ops_tables *o)
{
    table_free(&o->all);
    table_free(&o->cpu);
    table_free(&o->kernel);
}

/* HTA's kernel types (hta/utils/utils.py get_kernel_type), by the importer's class. */
static const char *const kernel_type[] = {[KERNEL_COMPUTE] = "computation",
                                          [KERNEL_COMM] = "communication",
                                          [KERNEL_MEMORY] = "memory"};

struct op_ref {
    const struct op_stat *s;
    const char *name;
};

/* CPU ops first, by self time; then kernels, by total time; ties by name. */
static int cmp_ref(const void *a, const void *b)
{
    const struct op_ref *x = a, *y = b;
    if (x->s->kind != y->s->kind)
        return x->s->kind < y->s->kind ? -1 : 1;
    int64_t kx = x->s->kind == OP_CPU ? x->s->self_ns : x->s->total_ns;
    int64_t ky = y->s->kind == OP_CPU ? y->s->self_ns : y->s->total_ns;
    if (kx != ky)
        return kx > ky ? -1 : 1;
    return strcmp(x->name, y->name);
}

static double us(int64_t ns)
{
    return (double)ns / 1e3;
}

static double pct(int64_t part, int64_t whole)
{
    return whole > 0 ? 100.0 * (double)part / (double)whole : 0.0;
}

static void ops_rank(struct ops_tables *o, const struct runset *rs, const struct run *run,
                     const struct rank_trace *t, struct op_ref *refs)
{
    const struct op_table *ot = t->ops;
    int64_t self_all = 0, type_all[3] = {0, 0, 0};
    for (size_t k = 0; k < ot->n; k++) {
        refs[k] = (struct op_ref){&ot->v[k], strpool_get(&rs->names, ot->v[k].name)};
        if (!refs[k].name)
            refs[k].name = "";
        if (ot->v[k].kind == OP_CPU)
            self_all += ot->v[k].self_ns;
        else if (ot->v[k].cls < 3)
            type_all[ot->v[k].cls] += ot->v[k].total_ns;
    }
    qsort(refs, ot->n, sizeof *refs, cmp_ref);
    size_t shown_cpu = 0, shown_kernel = 0;
    for (size_t k = 0; k < ot->n; k++) {
        const struct op_stat *s = refs[k].s;
        int cpu = s->kind == OP_CPU;
        const char *type = cpu || s->cls >= 3 ? "" : kernel_type[s->cls];
        double share = cpu ? pct(s->self_ns, self_all)
                           : pct(s->total_ns, s->cls < 3 ? type_all[s->cls] : 0);
        double mean = s->calls ? us(s->total_ns) / (double)s->calls : 0.0;
        struct table *a = &o->all;
        table_add_row(a);
        table_set(a, OA_RUN, "%s", run->label);
        table_set(a, OA_RANK, "%d", t->rank);
        table_set(a, OA_KIND, "%s", cpu ? "cpu_op" : "kernel");
        table_set(a, OA_TYPE, "%s", type);
        table_set(a, OA_NAME, "%s", refs[k].name);
        table_set(a, OA_CALLS, "%lld", (long long)s->calls);
        table_set(a, OA_TOTAL, "%.3f", us(s->total_ns));
        if (cpu)
            table_set(a, OA_SELF, "%.3f", us(s->self_ns));
        table_set(a, OA_MEAN, "%.3f", mean);
        if (s->calls) {
            table_set(a, OA_MIN, "%.3f", us(s->min_ns));
            table_set(a, OA_MAX, "%.3f", us(s->max_ns));
        }
        table_set(a, OA_SHARE, "%.2f", share);
        if (cpu && shown_cpu++ < OPS_TOP) {
            struct table *c = &o->cpu;
            table_add_row(c);
            table_set(c, OC_RUN, "%s", run->label);
            table_set(c, OC_RANK, "%d", t->rank);
            table_set(c, OC_NAME, "%s", refs[k].name);
            table_set(c, OC_CALLS, "%lld", (long long)s->calls);
            table_set(c, OC_SELF, "%.3f", us(s->self_ns));
            table_set(c, OC_TOTAL, "%.3f", us(s->total_ns));
            table_set(c, OC_SHARE, "%.2f", share);
        } else if (!cpu && shown_kernel++ < OPS_TOP) {
            struct table *c = &o->kernel;
            table_add_row(c);
            table_set(c, OK_RUN, "%s", run->label);
            table_set(c, OK_RANK, "%d", t->rank);
            table_set(c, OK_TYPE, "%s", type);
            table_set(c, OK_NAME, "%s", refs[k].name);
            table_set(c, OK_CALLS, "%lld", (long long)s->calls);
            table_set(c, OK_TOTAL, "%.3f", us(s->total_ns));
            table_set(c, OK_MEAN, "%.3f", mean);
            table_set(c, OK_SHARE, "%.2f", share);
        }
    }
}

void ops_tables_fill(struct ops_tables *o, const struct runset *rs)
{
    for (int i = 0; i < rs->n; i++) {
        const struct run *run = &rs->runs[i];
        for (int k = 0; k < run->nranks; k++) {
            const struct rank_trace *t = &run->ranks[k];
            if (!op_table_any(t->ops))
                continue;
            struct op_ref *refs = malloc(t->ops->n * sizeof *refs);
            if (!refs) {
                o->all.failed = 1;
                return;
            }
            ops_rank(o, rs, run, t, refs);
            free(refs);
        }
    }
}

int ops_tables_write(const struct ops_tables *o, const char *out_dir)
{
    if (o->all.nrows > 0 || o->all.failed)
        return table_write_csv(&o->all, out_dir);
    /* no op data: no ops.csv, not even an earlier report's in the same directory */
    char *path = NULL;
    if (asprintf(&path, "%s/%s", out_dir, o->all.file) < 0)
        return error_set("report: out of memory");
    int rc = unlink(path) == 0 || errno == ENOENT
                 ? 0
                 : error_set("%s: cannot remove an earlier report's ops.csv (%s)", path,
                             strerror(errno));
    free(path);
    return rc;
}
