/* runlog.h — the run directory: meta.csv (key,value) and metrics.csv (one row per step).
 *
 * Both are RFC 4180 CSV written through libcsv's quoting.  metrics.csv is flushed after
 * every row, so a crash leaves every finished step on disk and never half a row.  A rank
 * that is not rank 0 opens no files (runlog with dir == NULL is inert). */
#ifndef DDPPROF_RUNLOG_H
#define DDPPROF_RUNLOG_H

#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "probes/run_format.h"

struct runlog {
    char dir[4096];
    FILE *meta, *metrics;
    off_t meta_good, metrics_good; /* where each file's last whole row ends */
    long lost;      /* rows that did not reach the disk (runlog_close fails then) */
    char why[256];  /* the first such failure */
};

/* Make dir ready for a new run, before anything is written to it (under the job's
 * runlog_claim): a directory that is missing or empty (a claim's lock file aside) is fine; a non-empty one is refused (one error naming a file in it and
 * --overwrite), so a new run never mixes its files with an earlier run's (rank3.trace.csv
 * of a 4-rank run beside a new 2-rank run's files).  overwrite: instead remove the run
 * files there (meta.csv, metrics.csv, every rankN.trace.csv) and keep the rest
 * (checkpoints, which --resume may be reading; report tables, which the report rewrites).
 * 0 or -1 (error_set). */
int runlog_prepare(const char *dir, int overwrite);

/* Create dir (and its parents) and open meta.csv and metrics.csv in it; an unwritable
 * directory is one error naming it.  0 or -1 (error_set). */
int runlog_open(struct runlog *r, const char *dir);

/* Append one key,value row to meta.csv (value printf-formatted): a fixed key of the run
 * format (probes/run_format.h: RUN_META_world_size ...), or an indexed key and its index
 * (RUN_META_bucket_bytes, 3: "bucket.3.bytes").  No other key can be written. */
int runlog_meta(struct runlog *r, enum run_meta_key key, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
int runlog_meta_at(struct runlog *r, enum run_meta_indexed key, int index, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* One row of metrics.csv (header written by runlog_open):
 * step,epoch,loss,loss_scale,lr,images,found_inf — the global mean loss, the GradScaler
 * scale this step ran with (1 without fp16 scaling), the images of the step over all
 * ranks, and 1 when the step was skipped for an inf/nan gradient. */
struct step_metrics {
    int64_t step;
    int epoch;
    double loss, loss_scale, lr;
    int64_t images;
    int found_inf;
};

int runlog_metrics(struct runlog *r, const struct step_metrics *m);

/* Flush and close both files; 0, or -1 (error_set naming the file, how many rows were
 * lost and why) if any row since runlog_open failed to reach the disk. */
int runlog_close(struct runlog *r);

/* What tells a busy host, sampled at a run's start and end (meta.csv keys host_* and
 * cpu_s.rankN, report/FORMULAS.md "Figures measured under load"): the 1-minute load
 * average, the CPU time every process of this host used and the time the hypervisor
 * stole (/proc/stat, from boot; have_stat 0 where there is none), and this process's own
 * CPU time (user + system, every thread).  Seconds. */
struct host_usage {
    double load1;
    int have_stat;
    double busy_s, steal_s;
    double cpu_s;
};
void runlog_host_usage(struct host_usage *u);

/* Write one CSV field (quoted only when it must be) to f. */
void csv_field_write(FILE *f, const char *s);

/* mkdir -p; 0 or -1 (error_set naming the first directory that could not be made) */
int mkdir_parents(const char *path);

/* A run directory of the job's own, for a default --out: base itself, or else base-2,
 * base-3, ... whichever mkdir makes first (atomic: two jobs started in the same second get
 * two), its parents made as needed; the name into buf.  0 or -1 (error_set). */
int runlog_fresh_dir(char *buf, size_t cap, const char *base);

/* Claim dir (made as needed) for this job, node node_rank of it, until the returned
 * descriptor is closed or the process ends: an exclusive lock on dir/.ddpprof-node<R>.lock,
 * which holds our pid.  A directory another job holds is refused, naming it ("--out DIR is
 * in use by another ddpprof job (pid N) ..."); the nodes of one job may share a directory.
 * The lock file stays (runlog_prepare and the report pass over it).  The descriptor, or -1
 * (error_set). */
int runlog_claim(const char *dir, int node_rank);

#endif
