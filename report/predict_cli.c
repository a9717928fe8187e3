/* predict_cli.c — `ddpprof predict RUN_DIR [options]` (report.h): read the run and its
 * siblings (report/input), model and predict each combination of the options
 * (report/analysis/predict), write predict.csv and print it (report/output/predict_view).
 * Definitions: report/FORMULAS.md "Predictions". */
#include "report/report.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/error.h"
#include "common/options.h"
#include "report/analysis/analysis.h"
#include "report/output/outfile.h"
#include "report/analysis/predict.h"
#include "report/output/predict_view.h"
#include "report/input/run.h"

#define PREDICT_MAX_LIST 16 /* values per what-if option */
#define PREDICT_NOTES 4     /* lines of notes under the table */

struct predict_opts {
    const char *run_dir, *out_dir;
    int worlds[PREDICT_MAX_LIST], nworld;
    double caps[PREDICT_MAX_LIST], bws[PREDICT_MAX_LIST], lats[PREDICT_MAX_LIST];
    int ncap, nbw, nlat;
    int amps[PREDICT_MAX_LIST]; /* indices into predict_amps */
    int namp;
    int sbns[PREDICT_MAX_LIST]; /* indices into predict_onoff */
    int nsbn;
    int warmup_given, warmup_steps;
    const char *comm_from; /* --comm-from: the run whose calibrated comm to use */
    int help;
};

/* --amp's choices, each value its index here */
static const struct opt_choice predict_amps[] = {
    {"fp16", 0}, {"bf16", 1}, {"off", 2}, {NULL, 0}};
/* --sync-bn's */
static const struct opt_choice predict_onoff[] = {{"on", 0}, {"off", 1}, {NULL, 0}};

#define FIELD(f) OPT_FIELD(struct predict_opts, f)
#define LIST(f, n) OPT_LIST_FIELD(struct predict_opts, f, n)
#define G_WHATIF "what if (each a value or a list: --bucket-cap-mb 1,4,25)"
#define G_PREDICT "options"

/* in --help order */
static const struct opt predict_options[] = {
    {"--world", NULL, OPT_LIST, 0, LIST(worlds, nworld), .item = OPT_INT, .min = 1,
     .max = 65536, .what = "a whole rank count", .metavar = "N", .group = G_WHATIF,
     .dflt = "the run's own", .help = "ranks"},
    {"--bucket-cap-mb", NULL, OPT_LIST, 0, LIST(caps, ncap), .item = OPT_DOUBLE, .min = 1e-6,
     .max = 1e6, .metavar = "X", .group = G_WHATIF, .dflt = "the run's own",
     .help = "DDP bucket cap in MB of 2^20 bytes"},
    {"--bandwidth-gbps", NULL, OPT_LIST, 0, LIST(bws, nbw), .item = OPT_DOUBLE, .min = 1e-6,
     .max = 1e6, .metavar = "B", .group = G_WHATIF,
     .dflt = "fitted to the run's own all-reduces",
     .help = "link bandwidth in gigabits per second, 10^9 bit/s"},
    {"--latency-us", NULL, OPT_LIST, 0, LIST(lats, nlat), .item = OPT_DOUBLE, .min = 0,
     .max = 1e9, .metavar = "L", .group = G_WHATIF, .dflt = "fitted",
     .help = "ring latency per hop in microseconds"},
    {"--amp", NULL, OPT_LIST, 0, LIST(amps, namp), .item = OPT_ENUM, .choices = predict_amps,
     .group = G_WHATIF, .dflt = "the run's own",
     .help = "precision of conv and linear layers (the other precision's per-layer times "
             "come from the main job's other run)"},
    {"--sync-bn", NULL, OPT_LIST, 0, LIST(sbns, nsbn), .item = OPT_ENUM,
     .choices = predict_onoff, .group = G_WHATIF, .dflt = "the run's own",
     .help = "SyncBatchNorm (off: its collectives' transfer leaves the step, the rank wait "
             "they absorbed moves into the gradient all-reduce; on only for a run with it)"},
    {"--comm-from", NULL, OPT_STRING, 0, FIELD(comm_from), .metavar = "RUN_DIR",
     .group = G_PREDICT,
     .help = "the comm's latency and bandwidth fitted to that DDP run's all-reduces (a "
             "baseline predicted with another run's comm)"},
    {"--out", NULL, OPT_STRING, 0, FIELD(out_dir), .metavar = "DIR", .dflt = "RUN_DIR",
     .group = G_PREDICT, .help = "where predict.csv goes"},
    {"--warmup-steps", NULL, OPT_INT, 0, FIELD(warmup_steps), .min = 0, .max = 1000000,
     .metavar = "N", .group = G_PREDICT, .dflt = "detected, as the report",
     .help = "leave the first N steps out"},
    {"--help", "-h", OPT_FLAG, 0, FIELD(help), .flag_value = 1, .group = G_PREDICT,
     .help = "this text"},
};

#define PREDICT_NOPTIONS ((int)(sizeof predict_options / sizeof predict_options[0]))

static int predict_run_dir(void *ctx, const char *arg)
{
    struct predict_opts *o = ctx;
    if (o->run_dir)
        return error_set("predict: one run directory at a time ('%s' and '%s') (see ddpprof "
                         "predict --help)", o->run_dir, arg);
    o->run_dir = arg;
    return 0;
}

static void predict_help(const struct opt_parser *p)
{
    printf("usage: ddpprof predict RUN_DIR [options]\n"
           "\n"
           "Replays one median step of the run (a DDP run, or a baseline) as a dependency\n"
           "graph for each combination of the options (report/FORMULAS.md \"Predictions\")\n"
           "and writes predict.csv: the run's measured step (config measured) and each\n"
           "prediction (config predicted).  Without an option, a value is the run's own.\n"
           "\n"
           "  RUN_DIR                 a run directory (its baseline/ or ddp/ sibling is read "
           "too:\n"
           "                          other precision, comm calibration, the speedup's "
           "baseline),\n"
           "                          or a main job's directory (the DDP run is predicted "
           "from)\n"
           "\n");
    opt_usage(stdout, p, NULL, NULL);
}

static int predict_parse(int argc, char **argv, struct predict_opts *o)
{
    const struct opt_parser p = {.opts = predict_options, .nopts = PREDICT_NOPTIONS,
                                 .command = "predict", .positional = predict_run_dir, .ctx = o};
    uint64_t given = 0;
    if (opt_parse(&p, o, argc, argv, 1, &given))
        return -1;
    o->warmup_given = opt_given(&p, given, "--warmup-steps");
    if (o->help) {
        predict_help(&p);
        return 0;
    }
    if (!o->run_dir)
        return error_set("predict: no run directory given (see ddpprof predict --help)");
    return 0;
}

/* One `ddpprof predict`: its options, its runs and their analysis, the sources, the comm it
 * predicts with, the notes under the table and the table. */
struct predict_cli {
    struct predict_opts o;
    struct runset rs;
    struct run_stat *st;
    struct predict_grid g;
    int comm_first, comm_last; /* --comm-from's run: rs.runs[comm_first..comm_last) */
    struct predict_comm cal;
    const char *cal_from;
    int have_cal;
    char notes[PREDICT_NOTES][320];
    int nnotes;
    struct table t;
};

/* --comm-from's run: the one already read (a sibling), else read it.  0, or -1 after
 * error_set(). */
static int cli_comm_from(struct predict_cli *p)
{
    int rc = 0;
    p->comm_first = p->rs.n;
    char *want = realpath(p->o.comm_from, NULL);
    for (int i = 0; want && i < p->rs.n; i++) { /* already read (a sibling): that one */
        char *have = realpath(p->rs.runs[i].dir, NULL);
        if (have && strcmp(have, want) == 0)
            p->comm_first = i;
        free(have);
    }
    if (!run_dir_is_run(p->o.comm_from))
        rc = error_set("predict: --comm-from %s: not a run directory (give a DDP run's "
                       "directory: it holds meta.csv)", p->o.comm_from);
    else if (p->comm_first == p->rs.n)
        rc = runset_add_dir(&p->rs, p->o.comm_from);
    free(want);
    return rc;
}

/* Read the run (and the main job's other run beside it, and --comm-from's), analyse them
 * and model each: 0, or -1 after error_set(). */
static int cli_read(struct predict_cli *p)
{
    const struct predict_opts *o = &p->o;
    struct stat sb;
    if (stat(o->run_dir, &sb) != 0 || !S_ISDIR(sb.st_mode))
        return error_set("predict: %s: no such run directory (give a directory that "
                         "ddpprof wrote: it holds meta.csv, or baseline/ and ddp/)", o->run_dir);
    const int dir_is_run = run_dir_is_run(o->run_dir);
    int rc = runset_add_dir(&p->rs, o->run_dir);
    if (rc == 0 && p->rs.n == 0)
        rc = error_set("predict: %s holds no ddpprof run (no meta.csv in it, baseline/ or "
                       "ddp/)", o->run_dir);
    if (rc == 0 && dir_is_run)
        rc = runset_add_siblings(&p->rs, o->run_dir);
    p->comm_first = p->rs.n;
    if (rc == 0 && o->comm_from)
        rc = cli_comm_from(p);
    p->comm_last = o->comm_from ? (p->comm_first < p->rs.n ? p->comm_first + 1 : p->rs.n) : 0;
    if (rc == 0)
        rc = runset_finish(&p->rs);
    if (rc == 0 && !(p->st = analysis_run_warmup(&p->rs, o->warmup_given ? o->warmup_steps
                                                                       : ANALYSIS_WARMUP_AUTO)))
        rc = -1;
    p->g = (struct predict_grid){.rs = &p->rs, .st = p->st,
                                 .which = rc == 0 ? predict_pick(&p->rs, dir_is_run) : 0};
    if (rc == 0)
        rc = predict_grid_init(&p->g);
    return rc;
}

/* The comm to predict with: --comm-from's, else the run's or a sibling's calibration, else
 * the asked bandwidth (an error when none is asked and some rank count needs a comm).  0,
 * or -1 after error_set(). */
static int cli_calibration(struct predict_cli *p, const struct predict_source *s)
{
    const struct predict_opts *o = &p->o;
    if (o->comm_from) { /* asked for: that run's, or an error */
        for (int i = p->comm_first; i < p->comm_last && !p->have_cal; i++)
            if (p->g.src[i].run && p->g.src[i].calibrated) {
                p->cal = p->g.src[i].comm;
                p->cal_from = p->g.src[i].run->label;
                p->have_cal = 1;
            }
        if (!p->have_cal)
            return error_set("predict: --comm-from %s: no all-reduce there to fit the comm to "
                             "(a DDP run of 2 ranks or more)", o->comm_from);
    } else {
        p->have_cal = predict_source_comm(s, p->g.src, p->rs.n, &p->cal, &p->cal_from);
    }
    if (!p->have_cal && o->nbw == 0) {
        int wants_comm = s->world > 1;
        for (int k = 0; k < o->nworld; k++)
            wants_comm |= o->worlds[k] > 1;
        if (wants_comm)
            return error_set("predict: %s: no all-reduce to calibrate the comm from (a "
                             "baseline, or a run without its rows): give --bandwidth-gbps B "
                             "(and --latency-us L) or --comm-from DDP_RUN, or predict from the "
                             "DDP run", s->run->dir);
    }
    if (!p->have_cal)
        p->cal = (struct predict_comm){.latency_us = 0,
                                       .bandwidth_gbps = o->nbw ? o->bws[0] : 1};
    return 0;
}

/* The model of precision amp: s's own, or another run's per-layer times for the autocast
 * layers (*own_m 1: m->layers is the caller's to free), with a note saying which. */
static int cli_amp_model(struct predict_cli *p, const struct predict_source *s, const char *amp,
                         struct predict_model *m, int *own_m)
{
    *m = s->m;
    *own_m = 0;
    if (strcmp(amp, s->amp) == 0)
        return 0;
    const struct predict_source *other = predict_amp_source(&p->g, amp);
    if (other && s->layered) {
        if (predict_model_amp(s, other, m))
            return -1;
        *own_m = 1;
        if (p->nnotes < PREDICT_NOTES)
            snprintf(p->notes[p->nnotes++], sizeof p->notes[0],
                     "amp %s: conv and linear layers' times from run %s (scaled by the "
                     "other layers' ratio of the two runs)", amp, other->run->label);
    } else if (p->nnotes < PREDICT_NOTES) {
        snprintf(p->notes[p->nnotes++], sizeof p->notes[0],
                 "amp %s: no run in that precision with per-layer rows beside this one: "
                 "compute assumed unchanged", amp);
    }
    return 0;
}

/* One row per combination of the options (a value not given: the run's own). */
static int cli_grid(struct predict_cli *p, const struct predict_source *s)
{
    const struct predict_opts *o = &p->o;
    const int nw = o->nworld ? o->nworld : 1, nc = o->ncap ? o->ncap : 1,
              nbw = o->nbw ? o->nbw : 1, nl = o->nlat ? o->nlat : 1, na = o->namp ? o->namp : 1,
              ns = o->nsbn ? o->nsbn : 1;
    int noted_sbn = 0;
    const struct predict_comm *cal = &p->cal;
    const struct predict_config own = {.world = s->world, .bucket_cap_mb = s->cap_mb,
                                       .comm = *cal};
    struct predict_out own_out;
    int rc = predict_replay(&s->m, &own, &own_out);
    /* an asked bandwidth is the link's rate; over TCP the collective's payload gets a share
     * of it (predict_link_efficiency); the calibrated one is already payload */
    const double link_eff = predict_link_efficiency(s);
    if (rc == 0 && o->nbw && link_eff < 1.0)
        snprintf(p->notes[p->nnotes++], sizeof p->notes[0],
                 "comm %s: an asked bandwidth is the link's rate, of which TCP carries %.3g "
                 "as payload", s->run->meta.comm.s ? s->run->meta.comm.s : "?", link_eff);
    for (int ia = 0; ia < na && rc == 0; ia++) {
        const char *amp = o->namp ? predict_amps[o->amps[ia]].name : s->amp;
        struct predict_model m;
        int own_m;
        if ((rc = cli_amp_model(p, s, amp, &m, &own_m)))
            break;
        for (int is = 0; is < ns && rc == 0; is++) {
        const char *sbn = o->nsbn ? predict_onoff[o->sbns[is]].name
                                  : s->run->meta.sync_bn.s ? (s->sync_bn ? "on" : "off") : NULL;
        struct predict_model mm = m;
        if (sbn && strcmp(sbn, "off") == 0 && s->sync_bn) {
            predict_model_sync_bn_off(&m, &s->sbn, &mm);
            if (s->sbn.steps == 0 && !noted_sbn && p->nnotes < PREDICT_NOTES) {
                noted_sbn = 1;
                snprintf(p->notes[p->nnotes++], sizeof p->notes[0],
                         "sync_bn off: no SyncBatchNorm collectives found inside forward or "
                         "backward on every rank: the step is predicted unchanged");
            }
        } else if (sbn && strcmp(sbn, "on") == 0 && !s->sync_bn) {
            rc = error_set("predict: --sync-bn on: run %s has no SyncBatchNorm to measure "
                           "its collectives from (predict from a run with it)", s->run->dir);
            break;
        }
        for (int iw = 0; iw < nw && rc == 0; iw++)
            for (int ic = 0; ic < nc && rc == 0; ic++)
                for (int ib = 0; ib < nbw && rc == 0; ib++)
                    for (int il = 0; il < nl && rc == 0; il++) {
                        const double asked_bw = o->nbw ? o->bws[ib] : cal->bandwidth_gbps;
                        const struct predict_config c = {
                            .world = o->nworld ? o->worlds[iw] : s->world,
                            .bucket_cap_mb = o->ncap ? o->caps[ic] : s->cap_mb,
                            .comm = {.latency_us = o->nlat ? o->lats[il] : cal->latency_us,
                                     .bandwidth_gbps = o->nbw ? o->bws[ib] * link_eff
                                                              : cal->bandwidth_gbps,
                                     .floor_ms = cal->floor_ms,
                                     .busy_ms = cal->busy_ms,
                                     .grad_progress = cal->grad_progress,
                                     .cpu_ms_per_byte = cal->cpu_ms_per_byte}};
                        struct predict_out pr;
                        if ((rc = predict_one(s, &mm, &own, &own_out, &c, &pr)))
                            break;
                        predict_table_row(&p->t, &c, asked_bw, amp, sbn, &pr,
                                          predict_speedup_of(&p->g, c.world, s->batch, pr.step_ms),
                                          s->step_ms);
                    }
        }
        if (own_m)
            free(m.layers);
    }
    return rc;
}

int predict_main(int argc, char **argv)
{
    struct predict_cli p = {0};
    if (predict_parse(argc, argv, &p.o))
        return -1;
    if (p.o.help)
        return 0;
    runset_init(&p.rs);
    predict_table_init(&p.t);
    int rc = cli_read(&p);
    const struct predict_source *s = rc == 0 ? &p.g.src[p.g.which] : NULL;
    if (rc == 0)
        rc = cli_calibration(&p, s);
    if (rc == 0) {
        predict_table_measured(&p.t, s, predict_speedup_of(&p.g, s->world, s->batch, s->step_ms));
        rc = cli_grid(&p, s);
    }
    const char *out = p.o.out_dir ? p.o.out_dir : p.o.run_dir;
    if (rc == 0 && p.o.out_dir)
        rc = outfile_mkdirs(out);
    if (rc == 0)
        rc = table_write_csv(&p.t, out);
    if (rc == 0) {
        table_print(&p.t, stdout, 200);
        const struct predict_footer f = {
            .s = s, .cal = &p.cal, .cal_from = p.cal_from, .have_cal = p.have_cal,
            .comm_from = p.o.comm_from != NULL,
            .asks_world_above_1 = p.o.nworld == 0 || p.o.worlds[0] > 1, .notes = p.notes,
            .nnotes = p.nnotes, .out = out};
        predict_print_footer(stdout, &f);
    }
    table_free(&p.t);
    predict_grid_free(&p.g);
    analysis_free(p.st, p.rs.n);
    runset_free(&p.rs);
    return rc;
}
