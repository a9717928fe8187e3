/* importer.h — the report's input formats, as a table (report/input/importers.c): each importer
 * says which paths it reads (claims) and reads one (load), translating its format into the
 * import core's normalised events (report/input/import_core.h), which own steps, buckets and
 * clocks.  A new trace format is one file with its `struct importer` and one line of the
 * table (and, when it needs a library, a line of report/CMakeLists.txt). */
#ifndef DDPPROF_REPORT_IMPORTER_H
#define DDPPROF_REPORT_IMPORTER_H

#include <stddef.h>

#include "report/input/import_core.h"

/* How surely an importer reads a path.  A directory given to the report is read whole by
 * the importer that claims it YES or more; else its files claimed YES or more (only those of
 * the surest claim among them) are one run; else the importer that claimed it MAYBE reads
 * it.  A file given by name goes to the surest claim, MAYBE included. */
enum import_claim {
    IMPORT_CLAIM_NO,
    IMPORT_CLAIM_MAYBE, /* only when nothing surer claims it */
    IMPORT_CLAIM_YES,
    IMPORT_CLAIM_FIRST  /* in a directory, its files of this claim leave the others out */
};

struct importer {
    const char *name; /* the format, for people */
    /* Does this importer read path (is_dir: a directory, to be read whole)?  Cheap: a name,
     * at most the first bytes of the file. */
    enum import_claim (*claims)(const char *path, int is_dir);
    /* Read path: a file as ranks of the sink's run (import_rank_begin ..), or a directory
     * whole (its own runs of sink->rs).  Returns 0, or -1 after error_set() with one line
     * naming the file. */
    int (*load)(const char *path, struct import_sink *sink);
};

/* The table, in the order ties are broken (report/input/importers.c). */
extern const struct importer *const importers[];
extern const size_t importers_count;

/* The importer that claims path most surely (the first in the table on a tie), NULL when
 * none claims it at all; *level gets the claim (report/input/import_core.c). */
const struct importer *importer_for(const char *path, int is_dir, enum import_claim *level);

#endif
