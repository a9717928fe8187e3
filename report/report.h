/* report.h — `ddpprof report`: turn run directories and PyTorch profiler traces into the
 * tables, the merged timeline and the charts.  Reads the files probes/ writes
 * (probes/TRACE.md: rankN.trace.csv, meta.csv, metrics.csv) and torch.profiler's traces
 * (Kineto JSON, the legacy exporter's array: the importers, report/input/importer.h); never needs
 * the trainer or a GPU.  Formulas: report/FORMULAS.md. */
#ifndef DDPPROF_REPORT_H
#define DDPPROF_REPORT_H

#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Report on run_dirs[0..n).  Each is a run directory (it has meta.csv) or a parent holding
 * runs in subdirectories (baseline/ and ddp/, as `ddpprof --cpu N` writes them), or PyTorch
 * traces (report_run_opts); all runs are compared in one speedup table, the baseline being
 * the run with mode "baseline" (else world size 1).  Writes into out_dir (created if
 * missing; NULL: the first directory given, i.e. the run itself or the parent):
 * phases.csv, buckets.csv, overlap.csv, stragglers.csv, speedup.csv, ranks.csv,
 * timeline.json, phases.svg, speedup.svg, report.html.  Prints the tables, aligned with
 * units, to terminal (NULL: print nothing).  Warnings (a rank's trace missing, a truncated
 * last line, no clock offsets, no baseline) go to stderr and the report goes on with what
 * is there.  Returns 0, or -1 after error_set() with one line naming the file and line at
 * fault (missing column, non-numeric field, end before start, empty trace, not a run
 * directory, unwritable output).  The caller owns everything it passed. */
int report_run(const char *const *run_dirs, int n, const char *out_dir, FILE *terminal);

struct report_opts {
    const char *out_dir; /* NULL: the first input (a file's directory) */
    int kineto;          /* also write each ddpprof rank as Kineto JSON (out/kineto/...) */
    int timeline_full;   /* --timeline full: every row in timeline.json (else at most
                            TIMELINE_MAX_BYTES, report/output/timeline.h) */
    int warmup_given;    /* 0: detect each run's warm-up steps (report/FORMULAS.md) */
    int warmup_steps;    /* warmup_given: leave each run's first warmup_steps steps out of
                            the per-step statistics (0: none) */
    int hta_defaults;    /* --hta-defaults: PyTorch traces' kernel columns (k_, idle.csv) as
                            HTA's default settings give them (report/FORMULAS.md) */
    int diff;            /* REPORT_DIFF_*: also diff.csv and the page's diff section of two
                            runs (report/analysis/diff.h: which two) */
    int diff_only;       /* `ddpprof diff`: the terminal shows the diff alone */
    const char *tune_csv; /* --tune FILE: ddpprof tune's tune.csv, whose trials mark the
                            advice they measured "measured (A/B)" (NULL: none) */
};
#define REPORT_DIFF_OFF 0
#define REPORT_DIFF_ASKED 1 /* --diff, ddpprof diff: a diff that cannot be made is an error */
#define REPORT_DIFF_AUTO 2  /* the main job's, and `ddpprof report` of one input: when it
                               holds a baseline and one other run (else none) */

/* report_run with options, on any mix of inputs: ddpprof run directories (or parents of
 * runs), directories of PyTorch profiler traces (one run each, as tensorboard_trace_handler
 * writes them) and trace files (*.json, *.json.gz: all the files given form one run).
 * Also writes ranks.csv (where each rank came from, its clock offset and how it was found)
 * and, with opts->kineto, out/kineto/RUN/rankN.pt.trace.json for every ddpprof run. */
int report_run_opts(const char *const *inputs, int n, const struct report_opts *opts,
                    FILE *terminal);

/* `ddpprof report ARGS...` or `ddpprof diff A B` (argv[0] "diff": report --diff, the
 * terminal showing the diff alone; report/report_cli.c): argv[0] is the command's name, then
 * inputs and the options of its table (--out DIR, --kineto, --diff, --help, ...), parsed as
 * every command's are (common/options.h).  Prints the tables, or --help, to stdout.  Returns
 * 0, or -1 after error_set() with the one line the caller prints. */
int report_main(int argc, char **argv);

/* `ddpprof predict RUN_DIR [options]` (argv[0] the command's name; report/predict_cli.c):
 * prints the table and writes predict.csv, or prints --help.  Returns 0, or -1 after
 * error_set() with the one line to print. */
int predict_main(int argc, char **argv);

#ifdef __cplusplus
}
#endif
#endif
