/* import_ddpprof.c — ddpprof's own run directories as an importer (report/input/importer.h): the
 * reader is report/input/run.c (meta.csv, metrics.csv, rankN.trace.csv; probes/TRACE.md).  Its rows
 * already are the report's rows, with their steps, buckets and clock offsets (meta.csv), so
 * it makes its runs itself and hands the import core nothing. */
#include "report/input/importer.h"
#include "report/input/run.h"

/* A run directory (meta.csv) surely; any other directory maybe: a parent of runs
 * (baseline/, ddp/, repeat-K/), or, when it holds no trace file, the error that says what a
 * run directory is. */
static enum import_claim ddpprof_claims(const char *path, int is_dir)
{
    if (!is_dir)
        return IMPORT_CLAIM_NO;
    return run_dir_is_run(path) ? IMPORT_CLAIM_YES : IMPORT_CLAIM_MAYBE;
}

static int ddpprof_load(const char *path, struct import_sink *sink)
{
    return runset_add_dir(sink->rs, path);
}

const struct importer importer_ddpprof = {"ddpprof run directory", ddpprof_claims,
                                          ddpprof_load};
