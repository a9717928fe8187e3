/* notes.h — the lines beside the report's tables, each a judgement on the figures: the
 * warm-up steps left out, the spread of the runs made more than once, and the cautions (a
 * rank whose trace ends early, a failed collective, a run measured under load or
 * oversubscribed, a speedup that compares such runs, an efficiency above 1). */
#ifndef DDPPROF_REPORT_NOTES_H
#define DDPPROF_REPORT_NOTES_H

#include <stddef.h>

#include "report/analysis/analysis.h"
#include "report/analysis/repeats.h"

/* lines of text, one each (notes_free frees them) */
struct note_lines {
    char **line;
    size_t n, cap;
};

/* append one line (printf) to c; out of memory drops it */
void notes_add(struct note_lines *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void notes_free(struct note_lines *c);

/* Each run's warm-up ("step 1: 643.0 ms, warm-up, not counted") into warm, and the spread
 * of the runs made more than once (rep: repeats_read's) into spread. */
void notes_warmup_spread(const struct runset *rs, const struct run_stat *st,
                         const struct repeats *rep, struct note_lines *warm,
                         struct note_lines *spread);

/* The cautions beside the speedup table (report/FORMULAS.md "Figures measured under
 * load"), appended to *t, one line each (none: t->n stays 0). */
void notes_cautions(const struct runset *rs, const struct run_stat *st, struct note_lines *t);

#endif
