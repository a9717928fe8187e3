/* outfile.h — the report's output files appear whole or not at all.
 *
 * Each file is written to a temp file beside it (NAME.tmp.PID, same directory, so the
 * rename cannot cross file systems), flushed and fsync'ed, and renamed over NAME only
 * when every byte reached the disk: a full disk or a crash leaves the previous NAME (or
 * none), never a truncated one; a temp file whose process is gone (a report killed before
 * its rename) is removed by the next report that writes NAME.  Every report writer (tables, timeline, charts, Kineto
 * export) goes through it. */
#ifndef DDPPROF_REPORT_OUTFILE_H
#define DDPPROF_REPORT_OUTFILE_H

#include <stdio.h>

struct outfile {
    FILE *f;    /* write here between outfile_open and outfile_close */
    char *path; /* the file's name, owned */
    char *tmp;  /* the temp file's, owned */
};

/* Create path's temp file for writing (o->f).  0, or -1 after error_set("PATH: cannot
 * create (why)") with nothing created. */
int outfile_open(struct outfile *o, const char *path);

/* ok != 0: flush, fsync, close and rename the temp file over path; 0, or -1 after
 * error_set("PATH: write failed (why): check the disk") with the temp file removed and
 * path untouched (also when a write before failed: ferror).  ok == 0 (the caller gave up
 * for its own reason, already set): remove the temp file and return -1.  Frees o's
 * names either way. */
int outfile_close(struct outfile *o, int ok);

/* mkdir -p dir, then dir must be a directory: 0, or -1 after error_set() naming the part
 * that could not be created, or "DIR: not a directory: choose another --out".  Every
 * writer of an output directory (report, predict) makes it here. */
int outfile_mkdirs(const char *dir);

#endif
