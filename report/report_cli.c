/* report_cli.c — `ddpprof report` and `ddpprof diff` from the command line (report.h): their
 * option table, parsed and shown in --help by the parser every command shares
 * (common/options.h), then report_run_opts. */
#include "report/report.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/options.h"

/* One command line of report or diff: its options, its inputs. */
struct report_cli {
    struct report_opts o;
    int help;
    const char **inputs;
    int n;
};

#define FIELD(f) OPT_FIELD(struct report_cli, f)

static const struct opt_choice timeline_choices[] = {{"steps", 0}, {"full", 1}, {NULL, 0}};

#define G_REPORT "options (report and diff)"

/* in --help order */
static const struct opt report_options[] = {
    {"--out", NULL, OPT_STRING, 0, FIELD(o.out_dir), .metavar = "DIR",
     .dflt = "the first input's directory", .group = G_REPORT, .help = "where the tables go"},
    {"--kineto", NULL, OPT_FLAG, 0, FIELD(o.kineto), .flag_value = 1, .group = G_REPORT,
     .help = "also write each ddpprof rank as Kineto JSON in DIR/kineto/"},
    {"--timeline", NULL, OPT_ENUM, 0, FIELD(o.timeline_full), .choices = timeline_choices,
     .group = G_REPORT,
     .help = "timeline.json: at most 64 MiB, every rank's steps around each run's median and "
             "slowest step when all of it is more (steps; its otherData.rows says what it "
             "kept), or every row (full)"},
    {"--warmup-steps", NULL, OPT_INT, 0, FIELD(o.warmup_steps), .min = 0, .max = 1000000,
     .metavar = "N", .group = G_REPORT,
     .dflt = "until the step time settles, report/FORMULAS.md \"Warm-up steps\"",
     .help = "leave each run's first N steps out of the per-step statistics, the throughput "
             "and the speedup; 0 keeps them all"},
    {"--hta-defaults", NULL, OPT_FLAG, 0, FIELD(o.hta_defaults), .flag_value = 1,
     .group = G_REPORT,
     .help = "PyTorch traces' kernel columns (k_, idle.csv) as Holistic Trace Analysis' "
             "default settings give them: times rounded to µs, the last ProfilerStep's "
             "kernels left out"},
    {"--diff", NULL, OPT_FLAG, 0, FIELD(o.diff), .flag_value = REPORT_DIFF_ASKED,
     .group = G_REPORT,
     .help = "also diff.csv and a diff section on the page: the second run against the first "
             "(one main-job directory: its ddp run against its baseline), per phase, layer "
             "and bucket, each row's share of the step-time change (ddpprof diff A B: the "
             "same, the terminal showing the diff alone)"},
    {"--tune", NULL, OPT_STRING, 0, FIELD(o.tune_csv), .metavar = "TUNE_DIR/tune.csv",
     .group = G_REPORT,
     .help = "what ddpprof tune measured of this run's configuration: the advice it measured "
             "says measured (A/B), with the change and its range over the rounds "
             "(report/FORMULAS.md \"Advice\")"},
    {"--help", "-h", OPT_FLAG, 0, FIELD(help), .flag_value = 1, .group = G_REPORT,
     .help = "this text"},
};

#define REPORT_NOPTIONS ((int)(sizeof report_options / sizeof report_options[0]))

static int report_cli_input(void *ctx, const char *arg)
{
    struct report_cli *r = ctx;
    r->inputs[r->n++] = arg;
    return 0;
}

static void report_cli_help(const struct opt_parser *p)
{
    printf("usage: ddpprof report RUN_DIR|TRACE_DIR|TRACE.json[.gz]... [options]\n"
           "       ddpprof diff A B | ddpprof diff MAIN_JOB_DIR [options]\n"
           "                          where the step-time change between two runs comes from: "
           "diff.csv\n"
           "\n"
           "  RUN_DIR                 a ddpprof run directory, or a parent of runs (baseline/, "
           "ddp/)\n"
           "  TRACE_DIR               a directory of PyTorch profiler traces, one per rank, as\n"
           "                          torch.profiler.tensorboard_trace_handler writes them\n"
           "  TRACE.json              PyTorch profiler trace files (Kineto JSON or the legacy\n"
           "                          exporter's array; .gz too): all the files given form one "
           "run\n"
           "\n");
    opt_usage(stdout, p, NULL, NULL);
}

int report_main(int argc, char **argv)
{
    struct report_cli r = {.inputs = calloc((size_t)argc + 1, sizeof *r.inputs)};
    if (!r.inputs)
        return error_set("report: out of memory");
    const int diff = strcmp(argv[0], "diff") == 0;
    if (diff) { /* ddpprof diff A B: report --diff, the diff alone */
        r.o.diff = REPORT_DIFF_ASKED;
        r.o.diff_only = 1;
    }
    const struct opt_parser p = {.opts = report_options, .nopts = REPORT_NOPTIONS,
                                 .command = diff ? "diff" : "report",
                                 .positional = report_cli_input, .ctx = &r};
    uint64_t given = 0;
    int rc = opt_parse(&p, &r, argc, argv, 1, &given);
    r.o.warmup_given = opt_given(&p, given, "--warmup-steps");
    if (rc == 0 && r.help) {
        report_cli_help(&p);
    } else if (rc == 0) {
        if (!r.o.diff && r.n == 1) /* a main job's directory: its diff.csv, as the job writes it */
            r.o.diff = REPORT_DIFF_AUTO;
        rc = r.n == 0 ? error_set("%s: no run directory or trace given (see ddpprof %s --help)",
                                  p.command, p.command)
                      : report_run_opts(r.inputs, r.n, &r.o, stdout);
    }
    free(r.inputs);
    return rc;
}
