/* tune_results.c — reading `ddpprof tune`'s tune.csv and its given configuration
 * (tune_results.h). */
#include "report/input/tune_results.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/error.h"
#include "common/printable.h"
#include "common/vec.h"
#include "report/input/run.h"

/* tune.csv's columns (trainer/tune.c tune_report), by name */
enum tune_col { TC_CANDIDATE, TC_ARGS, TC_ROUNDS, TC_GIVEN, TC_STEP, TC_CHANGE, TC_LOW, TC_HIGH,
                TC_NOISE, TC_VERDICT, TC_NCOLS };
static const char *const tune_col_names[TC_NCOLS] = {
    "candidate", "args", "rounds", "step_ms_given", "step_ms", "change_pct", "low_pct",
    "high_pct", "noise_pct", "verdict"};

struct tune_read {
    struct tune_results *t;
    int col[TC_NCOLS];
};

static const char *tune_shown(const char *v)
{
    static _Thread_local char buf[TEXT_PRINTABLE_MAX];
    return text_printable(v, 40, buf, sizeof buf);
}

/* a finite number into *out, or -1 after error_set() naming the place */
static int tune_num(const struct tune_read *r, char **f, int c, long line, double *out)
{
    const char *s = f[r->col[c]];
    char *end = NULL;
    errno = 0;
    *out = strtod(s, &end);
    if (!*s || end == s || *end || errno || !isfinite(*out))
        return error_set("%s line %ld: %s is '%s', not a number", r->t->path, line,
                         tune_col_names[c], tune_shown(s));
    return 0;
}

static int tune_row(void *ctx, char **f, int nf, long line)
{
    struct tune_read *r = ctx;
    struct tune_results *t = r->t;
    if (line == 1) {
        for (int c = 0; c < TC_NCOLS; c++) {
            r->col[c] = -1;
            for (int i = 0; i < nf; i++)
                if (strcmp(f[i], tune_col_names[c]) == 0)
                    r->col[c] = i;
            if (r->col[c] < 0)
                return error_set("%s: no column '%s': not a tune.csv of ddpprof tune", t->path,
                                 tune_col_names[c]);
        }
        return 0;
    }
    for (int c = 0; c < TC_NCOLS; c++)
        if (r->col[c] >= nf)
            return error_set("%s line %ld: %d field(s), the header has more", t->path, line, nf);
    if (VEC_RESERVE(t->rows, t->cap, t->n + 1))
        return error_set("%s line %ld: out of memory", t->path, line);
    struct tune_row *w = &t->rows[t->n];
    memset(w, 0, sizeof *w);
    double rounds;
    if (tune_num(r, f, TC_ROUNDS, line, &rounds) ||
        tune_num(r, f, TC_GIVEN, line, &w->step_ms_given) ||
        tune_num(r, f, TC_STEP, line, &w->step_ms) ||
        tune_num(r, f, TC_CHANGE, line, &w->change_pct) ||
        tune_num(r, f, TC_LOW, line, &w->low_pct) || tune_num(r, f, TC_HIGH, line, &w->high_pct) ||
        tune_num(r, f, TC_NOISE, line, &w->noise_pct))
        return -1;
    if (rounds < 1 || rounds > 1e6 || !(w->step_ms_given > 0))
        return error_set("%s line %ld: rounds %g, step_ms_given %g: not a trial's", t->path, line,
                         rounds, w->step_ms_given);
    w->rounds = (int)rounds;
    const char *v = f[r->col[TC_VERDICT]];
    if (strcmp(v, "faster") != 0 && strcmp(v, "slower") != 0 && strcmp(v, "noise") != 0)
        return error_set("%s line %ld: verdict is '%s', not faster, slower or noise", t->path,
                         line, tune_shown(v));
    snprintf(w->verdict, sizeof w->verdict, "%s", v);
    w->candidate = strdup(f[r->col[TC_CANDIDATE]]);
    w->args = strdup(f[r->col[TC_ARGS]]);
    if (!w->candidate || !w->args) {
        free(w->args);
        free(w->candidate);
        return error_set("%s line %ld: out of memory", t->path, line);
    }
    t->n++;
    return 0;
}

int tune_results_read(const char *path, struct tune_results *out)
{
    memset(out, 0, sizeof *out);
    if (!(out->path = strdup(path)))
        return error_set("report: out of memory");
    struct tune_read r = {.t = out};
    if (run_csv_each(path, tune_row, &r) < 0)
        return -1;
    if (out->n == 0)
        return error_set("%s: no candidate in it", path);
    /* the given configuration: its first round's trial, TUNE_DIR/round-1/given */
    const char *slash = strrchr(path, '/');
    const int dirlen = slash ? (int)(slash - path) : 1;
    if (asprintf(&out->given_dir, "%.*s/round-1/given", dirlen, slash ? path : ".") < 0) {
        out->given_dir = NULL;
        return error_set("report: out of memory");
    }
    char *meta = NULL;
    struct stat sb;
    if (asprintf(&meta, "%s/meta.csv", out->given_dir) < 0)
        return error_set("report: out of memory");
    const int there = stat(meta, &sb) == 0;
    free(meta);
    if (there) {
        if (run_meta_read(out->given_dir, &out->given) < 0)
            return -1;
        out->has_given = 1;
    }
    return 0;
}

void tune_results_free(struct tune_results *t)
{
    for (size_t i = 0; i < t->n; i++) {
        free(t->rows[i].candidate);
        free(t->rows[i].args);
    }
    free(t->rows);
    free(t->path);
    free(t->given_dir);
    meta_free(&t->given);
    memset(t, 0, sizeof *t);
}
