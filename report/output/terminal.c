/* terminal.c — the report on the terminal (see terminal.h). */
#include "report/output/terminal.h"

#include <stdio.h>
#include <string.h>

#include "report/output/advice_view.h"

#define TERMINAL_MAX_ROWS 200

/* For the terminal: "# run n0: 4 ranks on 2 hosts, one clock (rank 0's)" for a run on
 * several hosts, and the restarts of an elastic run with their causes */
static void print_nodes(const struct runset *rs, FILE *out)
{
    for (int i = 0; i < rs->n; i++) {
        const struct run *r = &rs->runs[i];
        int hosts = 0;
        for (int k = 0; k < r->nranks; k++) {
            const char *h = run_rank_host(r, r->ranks[k].rank);
            int seen = !h;
            for (int j = 0; j < k && !seen; j++) {
                const char *o = run_rank_host(r, r->ranks[j].rank);
                seen = o && strcmp(o, h) == 0;
            }
            hosts += !seen;
        }
        if (hosts > 1)
            fprintf(out, "# run %s: %d ranks on %d hosts, one clock (rank 0's)\n", r->label,
                    r->nranks, hosts);
        /* restarts is at most the file's rows: a damaged count prints no flood */
        const struct meta_value *restarts = &r->meta.restarts;
        int64_t n = restarts->s && restarts->i > 0 ? restarts->i : 0;
        if ((size_t)n > r->meta.rows)
            n = (int64_t)r->meta.rows;
        for (int k = 1; k <= n; k++) {
            const struct meta_value *cause = meta_at(&r->meta.restart_cause, k);
            fprintf(out, "# run %s: restart %d of the job after: %s\n", r->label, k,
                    cause ? cause->s : "(cause not recorded)");
        }
        if (n > 0 && r->meta.resumed_step.s)
            fprintf(out, "# run %s: resumed at step %s (epoch %s); the failed attempts' traces "
                    "are in %s/attempt-*\n",
                    r->label, r->meta.resumed_step.s, meta_text(&r->meta.resumed_epoch), r->dir);
    }
}

static void print_diff(FILE *f, const struct diff_view *d)
{
    table_print(&d->top, f, TERMINAL_MAX_ROWS);
    fprintf(f, "#  diff %s\n", d->summary ? d->summary : "");
}

static void print_lines(FILE *f, const char *prefix, const struct note_lines *l)
{
    for (size_t i = 0; i < l->n; i++)
        fprintf(f, "#  %s%s\n", prefix, l->line[i]);
}

void terminal_diff_only(FILE *f, const struct report_screen *s)
{
    if (s->diff)
        print_diff(f, s->diff);
    fprintf(f, "#\n# diff in %s/diff.csv and report.html (and the report's tables beside "
               "them)\n", s->out);
    fflush(f);
}

void terminal_report(FILE *f, const struct report_screen *s)
{
    const struct table *t = s->tables->t;
    table_print(&t[TABLE_PHASES], f, TERMINAL_MAX_ROWS);
    print_lines(f, "", s->warm);
    table_print(&t[TABLE_OVERLAP], f, TERMINAL_MAX_ROWS);
    if (t[TABLE_IDLE].nrows > 0)
        table_print(&t[TABLE_IDLE], f, TERMINAL_MAX_ROWS);
    table_print(&t[TABLE_BUCKETS], f, TERMINAL_MAX_ROWS);
    if (t[TABLE_STRAGGLERS].nrows > 0) {
        table_print(&t[TABLE_WORST], f, STRAGGLERS_SHOWN);
        fprintf(f, "#  (%zu step(s) in all, in stragglers.csv)\n", t[TABLE_STRAGGLERS].nrows);
    }
    table_print(&t[TABLE_SPEEDUP], f, TERMINAL_MAX_ROWS);
    print_lines(f, "", s->spread);
    print_lines(f, "caution: ", s->cautions);
    for (size_t i = 0; i < s->nwhatif; i++)
        fprintf(f, "%s# %s\n", i ? "" : "#\n", s->whatif[i]);
    table_print(&t[TABLE_RANKS], f, TERMINAL_MAX_ROWS);
    if (t[TABLE_LAYERS].nrows > 0)
        fprintf(f, "# layers: %zu row(s) (per run, rank and layer) in layers.csv, the roofline "
                   "in report.html\n", t[TABLE_LAYERS].nrows);
    if (s->ops->cpu.nrows > 0)
        table_print(&s->ops->cpu, f, OPS_TOP);
    if (s->ops->kernel.nrows > 0)
        table_print(&s->ops->kernel, f, OPS_TOP);
    print_nodes(s->rs, f);
    if (s->diff)
        print_diff(f, s->diff);
    fprintf(f,
            "#\n# report in %s: phases.csv overlap.csv buckets.csv stragglers.csv "
            "speedup.csv ranks.csv idle.csv advice.csv %s%stimeline.json report.html "
            "phases.svg speedup.svg\n",
            s->out, s->ops->all.nrows > 0 ? "ops.csv " : "", s->diff ? "diff.csv " : "");
    if (s->kineto)
        fprintf(f, "# Kineto JSON: %d rank file(s) in %s/kineto/\n", s->kineto_files, s->out);
    advice_print(s->advice, f); /* the last lines: what to do */
    fflush(f);
}
