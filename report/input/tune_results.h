/* tune_results.h — what `ddpprof tune` measured (trainer/tune.h): its tune.csv, one row per
 * candidate change with the change of the median step over interleaved A/B rounds and
 * tune's verdict, and the configuration it changed (the meta.csv of its first round's
 * `given` trial, TUNE_DIR/round-1/given/meta.csv beside tune.csv), so the report can tell
 * whether the trials are of the run it advises on (report/FORMULAS.md "Advice": measured
 * (A/B)). */
#ifndef DDPPROF_REPORT_TUNE_RESULTS_H
#define DDPPROF_REPORT_TUNE_RESULTS_H

#include <stddef.h>

#include "report/input/meta.h"

/* One row of tune.csv. */
struct tune_row {
    char *candidate;      /* its name: "no-sync-bn", "one-bucket", or the user's */
    char *args;           /* the change: environment words, then option words, one space
                             between ("--bucket-cap-mb 1000", "DDPPROF_X=1 --threads 2") */
    int rounds;           /* interleaved rounds (each: the given configuration and this) */
    double step_ms_given; /* the median over the rounds of the given configuration's step */
    double step_ms;       /* ... of this candidate's */
    double change_pct;    /* the median over the rounds of its step / the given one's, - 1 */
    double low_pct, high_pct; /* the rounds' smallest and largest of that */
    double noise_pct;     /* how far the given configuration moved against itself */
    char verdict[8];      /* tune's: "faster", "slower" or "noise" */
};

struct tune_results {
    char *path;              /* the tune.csv read */
    struct tune_row *rows;
    size_t n, cap;
    int has_given;           /* given was read */
    char *given_dir;         /* where it was looked for: DIR/round-1/given */
    struct run_meta given;   /* the configuration the candidates change */
};

/* Read the tune.csv at path (and, when it is there, the given configuration's meta.csv
 * beside it) into *out (overwritten).  0, or -1 after error_set() naming the file and line
 * (unreadable, a column missing, a number that is not one, a verdict not faster, slower or
 * noise).  tune_results_free(out) either way. */
int tune_results_read(const char *path, struct tune_results *out);

void tune_results_free(struct tune_results *t);

#endif
