/* report.c — report_run and report_run_opts (see report.h), the orchestration: read the
 * inputs (report/input), analyse them (report/analysis), then write and print the tables,
 * the timeline, the page and, on request, the Kineto export (report/output).  The command
 * line of `ddpprof report` and `ddpprof diff` is report_cli.c's. */
#include "report/report.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/printable.h"
#include "report/analysis/advice.h"
#include "report/output/advice_view.h"
#include "report/analysis/analysis.h"
#include "report/output/charts.h"
#include "report/analysis/diff.h"
#include "report/output/diff_view.h"
#include "report/input/import.h"
#include "report/output/kineto.h"
#include "report/analysis/notes.h"
#include "report/output/ops_view.h"
#include "report/output/outfile.h"
#include "report/analysis/predict.h"
#include "report/output/predict_view.h"
#include "report/analysis/repeats.h"
#include "report/input/run.h"
#include "report/input/tune_results.h"
#include "report/output/tables.h"
#include "report/output/terminal.h"
#include "report/output/timeline.h"

/* One report: its inputs and options, what was read and computed, and what is shown. */
struct report_job {
    const char *const *inputs;
    int n;
    const struct report_opts *opts;
    const char *out;
    char *diff_out; /* ddpprof diff A B: FIRST/diff, not A's own report */
    int warmup;
    struct runset rs;
    struct run_stat *st;
    struct repeats *rep;
    struct note_lines cautions, warm, spread;
    struct diff_view diff;
    int has_diff;
    struct report_tables tables;
    struct ops_tables ops; /* ops.csv: imports that name their ops (report/input/ops.h) */
    struct predict_whatif wf; /* predict's what-if: the page's and the advice's */
    char **whatif;            /* its lines (report/output/predict_view.h) */
    size_t nwhatif;
    struct advice adv; /* the verdict and recommendations: advice.csv, page, terminal */
    struct tune_results tune; /* --tune's tune.csv (tune.n 0: none) */
    struct table adv_t;
    int kineto_files;
};

/* The diff of two runs (report/analysis/diff.h) into j->diff and out/diff.csv; j->has_diff 1 when
 * there is one.  how: REPORT_DIFF_ASKED (a diff that cannot be made is an error) or
 * REPORT_DIFF_AUTO (a main job's baseline and DDP run; otherwise, or when it cannot be
 * made, none). */
static int report_diff(struct report_job *j, int how)
{
    const struct runset *rs = &j->rs;
    int a, b;
    if (how == REPORT_DIFF_AUTO && (rs->n != 2 || analysis_baseline(rs) < 0))
        return 0;
    struct diff_result r = {0};
    int rc = diff_pick(rs, j->inputs, j->n, &a, &b);
    if (rc == 0)
        rc = diff_compute(rs, j->st, a, b, &r);
    if (rc == 0)
        rc = diff_view_make(&j->diff, &r, rs);
    diff_free(&r);
    if (rc == 0)
        rc = table_write_csv(&j->diff.full, j->out);
    if (rc == 0) {
        j->has_diff = 1;
        return 0;
    }
    diff_view_free(&j->diff);
    if (how == REPORT_DIFF_ASKED)
        return -1;
    return 0; /* an automatic diff that cannot be made is left out (ddpprof diff says why) */
}

/* Read the inputs and settle where the files go (made here).  0, or -1 (error_set). */
static int report_read(struct report_job *j)
{
    const struct report_opts *opts = j->opts;
    int rc = import_inputs(&j->rs, j->inputs, j->n);
    if (rc == 0)
        rc = runset_finish(&j->rs);
    j->out = opts && opts->out_dir ? opts->out_dir : j->rs.default_out;
    if (rc == 0 && opts && opts->diff_only && !opts->out_dir && j->n == 2 && j->out) {
        if (asprintf(&j->diff_out, "%s/diff", j->out) < 0)
            rc = error_set("report: out of memory");
        else
            j->out = j->diff_out;
    }
    if (rc == 0)
        rc = outfile_mkdirs(j->out);
    return rc;
}

/* Analyse the runs: the figures, the diff, the repeats, the notes and cautions, the tables,
 * the what-if figures and the advice.  0, or -1 (error_set). */
static int report_analyse(struct report_job *j)
{
    const struct report_opts *opts = j->opts;
    int rc = 0;
    if (!(j->st = analysis_run_warmup(&j->rs, j->warmup)))
        return -1;
    if (opts && opts->diff)
        rc = report_diff(j, opts->diff);
    if (rc == 0 && !(j->rep = calloc((size_t)j->rs.n + 1, sizeof *j->rep)))
        rc = error_set("report: out of memory");
    if (rc == 0)
        rc = repeats_read(&j->rs, j->st, j->warmup, j->rep);
    if (rc == 0) {
        notes_warmup_spread(&j->rs, j->st, j->rep, &j->warm, &j->spread);
        notes_cautions(&j->rs, j->st, &j->cautions);
        rc = tables_fill(&j->tables, &j->rs, j->st, j->rep);
        ops_tables_fill(&j->ops, &j->rs);
    }
    if (rc == 0)
        rc = predict_whatif_figures(&j->rs, j->st, &j->wf);
    if (rc == 0 && opts && opts->tune_csv)
        rc = tune_results_read(opts->tune_csv, &j->tune);
    if (rc == 0 && (rc = advice_make(&j->rs, j->st, j->rep, &j->wf,
                                     j->tune.n ? &j->tune : NULL, &j->adv)) == 0)
        advice_table(&j->adv, &j->rs, &j->adv_t);
    return rc;
}

/* report.html, with the tables shown in this order and the notes beside them. */
static int report_page(struct report_job *j)
{
    const struct table *t = j->tables.t;
    const struct table *shown[8] = {&t[TABLE_SPEEDUP], &t[TABLE_OVERLAP], &t[TABLE_PHASES],
                                    &t[TABLE_BUCKETS], &t[TABLE_WORST], &t[TABLE_RANKS]};
    int nshown = 6;
    if (j->ops.cpu.nrows > 0)
        shown[nshown++] = &j->ops.cpu;
    if (j->ops.kernel.nrows > 0)
        shown[nshown++] = &j->ops.kernel;
    struct note_lines notes = {0};
    for (size_t i = 0; i < j->spread.n; i++)
        notes_add(&notes, "%s", j->spread.line[i]);
    for (size_t i = 0; i < j->warm.n; i++)
        notes_add(&notes, "%s", j->warm.line[i]);
    for (size_t i = 0; i < j->nwhatif; i++)
        notes_add(&notes, "%s", j->whatif[i]);
    const struct chart_section sect = {diff_write_html, &j->diff};
    int rc = charts_write_sections(&j->rs, j->st, shown, nshown,
                                   (const char *const *)j->cautions.line, j->cautions.n,
                                   (const char *const *)notes.line, notes.n, &j->adv, &sect,
                                   j->has_diff, j->out);
    notes_free(&notes);
    return rc;
}

/* Write every file: the tables' CSV, ops.csv, timeline.json, the page, the Kineto export.
 * 0, or -1 (error_set). */
static int report_write(struct report_job *j)
{
    const struct report_opts *opts = j->opts;
    int rc = table_write_csv(&j->adv_t, j->out);
    if (rc == 0)
        rc = tables_write(&j->tables, j->out);
    if (rc == 0)
        rc = ops_tables_write(&j->ops, j->out);
    if (rc == 0) {
        char *path = NULL;
        if (asprintf(&path, "%s/timeline.json", j->out) < 0)
            rc = error_set("report: out of memory");
        else
            rc = timeline_write(&j->rs, j->st, path,
                                opts && opts->timeline_full ? 0 : TIMELINE_MAX_BYTES);
        free(path);
    }
    if (rc == 0)
        rc = predict_whatif(&j->rs, &j->wf, &j->whatif, &j->nwhatif);
    if (rc == 0)
        rc = report_page(j);
    if (rc == 0 && opts && opts->kineto)
        rc = kineto_write(&j->rs, j->out, &j->kineto_files);
    return rc;
}

static void report_print(const struct report_job *j, FILE *terminal)
{
    const struct report_screen s = {
        .rs = &j->rs, .tables = &j->tables, .ops = &j->ops, .warm = &j->warm,
        .spread = &j->spread, .cautions = &j->cautions, .whatif = j->whatif,
        .nwhatif = j->nwhatif, .diff = j->has_diff ? &j->diff : NULL, .advice = &j->adv,
        .out = j->out, .kineto = j->opts && j->opts->kineto, .kineto_files = j->kineto_files};
    if (j->opts && j->opts->diff_only)
        terminal_diff_only(terminal, &s);
    else
        terminal_report(terminal, &s);
}

static void report_job_free(struct report_job *j)
{
    advice_free(&j->adv);
    tune_results_free(&j->tune);
    table_free(&j->adv_t);
    for (size_t i = 0; i < j->nwhatif; i++)
        free(j->whatif[i]);
    free(j->whatif);
    notes_free(&j->cautions);
    notes_free(&j->warm);
    notes_free(&j->spread);
    diff_view_free(&j->diff);
    free(j->diff_out);
    free(j->rep);
    tables_free(&j->tables);
    ops_tables_free(&j->ops);
    analysis_free(j->st, j->rs.n);
    runset_free(&j->rs);
}

static int report_run_to(const char *const *inputs, int n, const struct report_opts *opts,
                         FILE *terminal)
{
    if (n < 1 || !inputs)
        return error_set("report: no run directory or trace given (see ddpprof report --help)");
    struct report_job j = {.inputs = inputs, .n = n, .opts = opts, .wf = {.run = -1}};
    runset_init(&j.rs);
    j.rs.hta_defaults = opts && opts->hta_defaults;
    j.warmup = opts && opts->warmup_given ? opts->warmup_steps : ANALYSIS_WARMUP_AUTO;
    tables_init(&j.tables);
    ops_tables_init(&j.ops);
    table_init(&j.adv_t, "advice: every candidate, best first", "advice.csv", advice_cols,
               advice_ncols);
    int rc = report_read(&j);
    if (rc == 0)
        rc = report_analyse(&j);
    if (rc == 0)
        rc = report_write(&j);
    if (rc == 0 && terminal)
        report_print(&j, terminal);
    report_job_free(&j);
    return rc;
}

int report_run(const char *const *run_dirs, int n, const char *out_dir, FILE *terminal)
{
    struct report_opts o = {.out_dir = out_dir};
    return report_run_opts(run_dirs, n, &o, terminal);
}

int report_run_opts(const char *const *inputs, int n, const struct report_opts *opts,
                    FILE *terminal)
{
    /* names from the traces (ops, kernels, hosts, paths) reach the terminal with their
     * control bytes escaped: no escape sequence of theirs retitles or drives it */
    FILE *shown = terminal ? text_terminal_stream(terminal) : NULL;
    int rc = report_run_to(inputs, n, opts, shown ? shown : terminal);
    if (shown)
        fclose(shown); /* a write that failed left its error on terminal, for the caller */
    return rc;
}
