/* tables.h — the report's tables of the analysis (report/analysis/analysis.h): phases.csv,
 * overlap.csv, buckets.csv, stragglers.csv (and its worst steps for the terminal and the
 * page), speedup.csv, ranks.csv, idle.csv and layers.csv.  The host column of the per-rank
 * tables is there only when a run names its ranks' hosts (meta.csv host.rankN). */
#ifndef DDPPROF_REPORT_TABLES_H
#define DDPPROF_REPORT_TABLES_H

#include "report/analysis/analysis.h"
#include "report/analysis/repeats.h"
#include "report/output/table.h"

#define STRAGGLERS_SHOWN 10 /* the worst steps kept in TABLE_WORST */

enum report_table {
    TABLE_PHASES, TABLE_OVERLAP, TABLE_BUCKETS, TABLE_STRAGGLERS, TABLE_SPEEDUP, TABLE_RANKS,
    TABLE_IDLE,
    TABLE_WORST,  /* stragglers.csv's worst steps: shown, not written */
    TABLE_LAYERS, /* written when it has rows (--trace full runs) */
    TABLE_COUNT
};

struct report_tables {
    struct table t[TABLE_COUNT];
};

void tables_init(struct report_tables *r);

/* Fill every table from the runs rs, their analysis st and their repeats rep (whose
 * figures speedup.csv's spread sorts in place).  0, or -1 after error_set() (out of
 * memory). */
int tables_fill(struct report_tables *r, const struct runset *rs, const struct run_stat *st,
                struct repeats *rep);

/* Write each table's CSV file into out (TABLE_WORST aside; layers.csv when it has rows).
 * 0, or -1 after error_set() naming the file. */
int tables_write(const struct report_tables *r, const char *out);

void tables_free(struct report_tables *r);

#endif
