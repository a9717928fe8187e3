/* advice_view.h — the advice (report/analysis/advice.h) shown: the terminal's last lines, the
 * page's block at the top and advice.csv, all from the same lines. */
#ifndef DDPPROF_REPORT_ADVICE_VIEW_H
#define DDPPROF_REPORT_ADVICE_VIEW_H

#include <stddef.h>
#include <stdio.h>

#include "report/analysis/advice.h"
#include "report/output/table.h"

/* The lines shown: the verdict, then each recommendation shown (or, when none is
 * recommended, one line saying so): 1 + max(advice_shown(a), 1). */
size_t advice_nlines(const struct advice *a);

/* Line k < advice_nlines(a): 0 is the verdict ("verdict: ..."), k >= 1 is "k. TEXT [up to
 * -X.X ms per step, measured (trace)]" ("about -X.X ms per step, predicted|assumed", with
 * the interval "(-LO to -HI)" where known; "-X.X ms per step (-LO to -HI), measured
 * (A/B)").  When no candidate is recommended, line 1 is "what to do, from the verdict's
 * cause ..." where the verdict named the cause of a speedup gap, a pointer to the diff
 * where it could not, else "no recommendation: ...", each saying why none is (no rule's
 * threshold reached, or the candidates' statuses in advice.csv).  The terminal and the
 * page print exactly these strings.  Writes into buf (NUL-terminated, cut to size:
 * ADVICE_LINE_MAX holds every line). */
#define ADVICE_LINE_MAX 2048
void advice_line(const struct advice *a, size_t k, char *buf, size_t size);

/* The terminal: "#", then each line of advice_line as "# LINE". */
void advice_print(const struct advice *a, FILE *out);

/* The page's block at the top: the same lines, HTML-escaped, one paragraph each. */
void advice_write_html(const struct advice *a, FILE *out);

/* advice.csv: the verdict (order 0), then every candidate in rank order with its run,
 * rule, saving and its interval, share of the step, source, status, the noise it was held
 * against, tune's verdict and whether it is shown. */
extern const struct table_col advice_cols[];
extern const int advice_ncols;
void advice_table(const struct advice *a, const struct runset *rs, struct table *t);

#endif
