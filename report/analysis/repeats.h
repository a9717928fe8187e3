/* repeats.h — a main job's runs made more than once (--repeat N): each run's wall time,
 * throughput and speedup over its repeats (report/FORMULAS.md "Repeats"). */
#ifndef DDPPROF_REPORT_REPEATS_H
#define DDPPROF_REPORT_REPEATS_H

#include <stddef.h>

#include "report/analysis/analysis.h"

/* ---- repeats (--repeat N of the main job; FORMULAS.md "Repeats") ----
 * Repeat 1 of a main job is DIR/baseline and DIR/ddp, repeat k >= 2 DIR/repeat-k/baseline
 * and DIR/repeat-k/ddp.  A run's repeats are the runs of the same name in repeat-2/,
 * repeat-3/, ... beside it; each repeat's speedup is against that repeat's baseline. */
#define REPORT_MAX_REPEATS 100

struct repeats {
    int n;                     /* repeats read, this run included (1: none beside it) */
    double wall[REPORT_MAX_REPEATS], ips[REPORT_MAX_REPEATS], speedup[REPORT_MAX_REPEATS];
    int nwall, nips, nspeedup; /* the repeats with each figure */
};

/* Fill rep[0..rs->n) (zeroed): each ddpprof run's own figures, then those of its repeats,
 * read from the repeat-k/ directories beside it with the same warm-up rule (warmup, as
 * analysis_run_warmup takes it).  0, or -1 (error_set). */
int repeats_read(const struct runset *rs, const struct run_stat *st, int warmup,
                 struct repeats *rep);

#endif
