/* import_nsys.c — Nsight Systems reports as an importer (report/input/importer.h): nsys's SQLite
 * export (`nsys export --type sqlite`), read with SQLite's C library; a .nsys-rep is exported
 * first (beside it, as `nsys stats` does, else in $TMPDIR) by the nsys in $NSYS or on PATH.
 *
 * What is read (report/FORMULAS.md "Imported Nsight Systems reports"):
 *   NVTX_EVENTS (+ StringIds for registered strings, its NvtxDomainCreate rows for domain
 *     names): push/pop and start/end ranges.  The "ddpprof" domain's ranges are ddpprof's
 *     own phases (probes/nvtx.h's contract 2: step with its number as payload, data,
 *     forward with its images, backward, optimizer, eval, allreduce.bN: the buckets,
 *     comm.KIND and barrier: the other collectives, these with their bytes; its mark
 *     "ddpprof nvtx=2 rank=R world_size=W" says who the process is); the "NCCL" domain's
 *     ncclAllReduce/ncclBroadcast/... are the collectives' descriptions (IMPORT_PARAMS; bytes
 *     from an extended payload's "Message size" when the export has it); every other range
 *     (PyTorch's ProfilerStep#N, DistributedDataParallel.forward, autograd ops, Optimizer.step,
 *     nccl:all_reduce, with emit_nvtx's ", seq = N ..." cut off) through pytorch_names.c's rules.
 *   CUPTI_ACTIVITY_KIND_KERNEL / _MEMCPY / _MEMSET: device activity (NCCL kernels by
 *     pytorch_names.c's kernel rules), CUPTI_ACTIVITY_KIND_RUNTIME: the launches (correlation
 *     ids).  Absent on a CPU-only report (Debian's nsys): then there is no device activity.
 *   TARGET_INFO_SESSION_START_TIME.utcEpochNs: the base time (event times are ns since the
 *     session start), TARGET_INFO_SYSTEM_ENV's Hostname: the host (nsys's clock is one per
 *     host: ranks of one host share it; across hosts the core aligns as for Kineto).
 * The rank: RANK (SLURM_PROCID, ...) in the environment nsys recorded
 * (TARGET_INFO_SYSTEM_ENV's DeviceEnvironment; one process per report), else ddpprof's
 * rank mark, else "rankN" in the file name (scripts/nsys-profile's <phase>.rank<N>), else a
 * file name ending in .N (nsys -o report.%q{RANK}); a report holding several training
 * processes (nsys profile torchrun ...) is one rank per training process: its mark's, else
 * in pid order.  A report without NVTX_EVENTS but with kernels is read as one step.
 *
 * Columns are found by name (pragma table_info), so the exports of nsys 2022.4 (Debian's;
 * schema 3.0) and of current releases both read; a table or column this file needs and the
 * export lacks is an error naming it.  Rows stream through sqlite3_step in start order. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/error.h"
#include "report/input/import_core.h"
#include "report/input/import_group.h"
#include "report/input/importer.h"
#include "report/input/pytorch_names.h"
#include "report/input/run.h"

static int has_suffix(const char *s, const char *suf)
{
    size_t n = strlen(s), m = strlen(suf);
    return n >= m && strcmp(s + n - m, suf) == 0;
}

/* Does the file begin with SQLite's header? */
static int is_sqlite_file(const char *path)
{
    char b[16];
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t got = read(fd, b, sizeof b);
    close(fd);
    return got == 16 && memcmp(b, "SQLite format 3", 16) == 0;
}

/* .sqlite surely; .nsys-rep surely, but only maybe where its export X.sqlite is beside it (in
 * a directory the export is read, not the report twice; given by name it is still read, from
 * that export); any file given by name that is an SQLite database. */
static enum import_claim nsys_claims(const char *path, int is_dir)
{
    if (is_dir)
        return IMPORT_CLAIM_NO;
    if (has_suffix(path, ".sqlite"))
        return IMPORT_CLAIM_YES;
    if (has_suffix(path, ".nsys-rep") || has_suffix(path, ".qdrep")) {
        size_t stem = strlen(path) - (has_suffix(path, ".nsys-rep") ? 9 : 6);
        char *twin = NULL;
        struct stat st;
        int exported = asprintf(&twin, "%.*s.sqlite", (int)stem, path) >= 0 &&
                       stat(twin, &st) == 0 && S_ISREG(st.st_mode);
        free(twin);
        return exported ? IMPORT_CLAIM_MAYBE : IMPORT_CLAIM_YES;
    }
    return is_sqlite_file(path) ? IMPORT_CLAIM_YES : IMPORT_CLAIM_NO;
}

#ifndef DDPPROF_HAVE_SQLITE

static int nsys_load(const char *path, struct import_sink *sink)
{
    (void)sink;
    return error_set("%s: this ddpprof was built without SQLite: install libsqlite3-dev and "
                     "rebuild (scripts/setup) to read Nsight Systems reports",
                     path);
}

#else

#include <sqlite3.h>

/* The rank in a file name: "rankN" (import_group_name_rank), else a stem ending in ".N"
 * (import_group_dotted_rank: nsys -o NAME.%q{RANK}); -1 none. */
static int64_t nsys_rank_of(const char *path)
{
    int named;
    if (import_group_name_rank(path, NULL, 0, &named) ||
        import_group_dotted_rank(path, NULL, 0, &named))
        return named;
    return -1;
}

/* ---- the export: .nsys-rep → .sqlite ---- */

/* The nsys to export with: $NSYS, else nsys on PATH; NULL when none. */
static char *nsys_find(void)
{
    const char *env = getenv("NSYS");
    if (env && *env)
        return access(env, X_OK) == 0 ? strdup(env) : NULL;
    const char *path = getenv("PATH");
    if (!path)
        return NULL;
    char *dup = strdup(path), *save = NULL, *found = NULL;
    for (char *d = dup ? strtok_r(dup, ":", &save) : NULL; d && !found;
         d = strtok_r(NULL, ":", &save)) {
        char *cand = NULL;
        if (asprintf(&cand, "%s/nsys", *d ? d : ".") < 0)
            break;
        if (access(cand, X_OK) == 0)
            found = cand;
        else
            free(cand);
    }
    free(dup);
    return found;
}

/* Run nsys export of rep into out (stdout and stderr to log).  Returns the exit status. */
static int nsys_export_run(const char *nsys, const char *rep, const char *out, const char *log)
{
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
        }
        execl(nsys, nsys, "export", "--type", "sqlite", "--force-overwrite", "true", "-o", out,
              rep, (char *)NULL);
        _exit(127);
    }
    int st;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR)
            return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
}

/* The SQLite export of the report rep: X.sqlite beside it when that is newer, else exported
 * there (or, where the directory is not writable, in $TMPDIR: *tmp set, to be removed).
 * NULL after error_set(). */
static char *nsys_export(const char *rep, int *tmp)
{
    *tmp = 0;
    size_t n = strlen(rep);
    size_t stem = has_suffix(rep, ".nsys-rep") ? n - 9 : has_suffix(rep, ".qdrep") ? n - 6 : n;
    char *db = NULL;
    if (asprintf(&db, "%.*s.sqlite", (int)stem, rep) < 0) {
        error_set("%s: out of memory", rep);
        return NULL;
    }
    struct stat sr, sd;
    if (stat(rep, &sr) < 0) {
        error_set("%s: cannot read it (%s)", rep, strerror(errno));
        free(db);
        return NULL;
    }
    if (stat(db, &sd) == 0 && sd.st_size > 0 && sd.st_mtime >= sr.st_mtime)
        return db; /* exported already */
    char *nsys = nsys_find();
    if (!nsys) {
        error_set("%s: an Nsight Systems report, and no nsys to export it (none in $NSYS or on "
                  "PATH): run `nsys export --type sqlite -o %s %s` where nsys is (or "
                  "scripts/setup-nsys, then NSYS=build-nsys/root/usr/bin/nsys) and give the "
                  "report the .sqlite",
                  rep, db, rep);
        free(db);
        return NULL;
    }
    const char *tdir = getenv("TMPDIR");
    if (!tdir || !*tdir)
        tdir = "/tmp";
    char *log = NULL;
    if (asprintf(&log, "%s/ddpprof-nsys-export.%d.log", tdir, (int)getpid()) < 0) {
        free(nsys);
        free(db);
        error_set("%s: out of memory", rep);
        return NULL;
    }
    int rc = nsys_export_run(nsys, rep, db, log);
    if (rc != 0 || stat(db, &sd) < 0) { /* a read-only directory: in $TMPDIR */
        char *tdb = NULL;
        const char *base = strrchr(rep, '/');
        base = base ? base + 1 : rep;
        size_t bstem = strlen(base) - (n - stem);
        if (asprintf(&tdb, "%s/ddpprof-nsys.%d.%.*s.sqlite", tdir, (int)getpid(), (int)bstem,
                     base) >= 0) {
            rc = nsys_export_run(nsys, rep, tdb, log);
            if (rc == 0 && stat(tdb, &sd) == 0) {
                free(db);
                db = tdb;
                *tmp = 1;
            } else {
                unlink(tdb);
                free(tdb);
                rc = rc ? rc : -1;
            }
        }
    }
    if (rc != 0) {
        char line[200] = "";
        FILE *f = fopen(log, "r");
        if (f) {
            char buf[200];
            while (fgets(buf, sizeof buf, f)) /* its last line */
                if (buf[0] != '\n')
                    memcpy(line, buf, sizeof line);
            fclose(f);
            line[strcspn(line, "\n")] = 0;
        }
        error_set("%s: `%s export --type sqlite` failed (exit %d%s%s)", rep, nsys, rc,
                  line[0] ? ": " : "", line);
        free(db);
        db = NULL;
    }
    unlink(log);
    free(log);
    free(nsys);
    return db;
}

/* ---- opening: read-only, immutable, bounded ---- */

/* The time an export may take to read: 60 s + 1 s per MiB (nsys's own exports read at tens
 * of MiB a second), checked by a progress handler every NSYS_PROGRESS_OPS virtual-machine
 * steps: a query that runs longer (a damaged or hostile file) is interrupted. */
#define NSYS_PROGRESS_OPS 100000

struct nsys_deadline {
    struct timespec end;
    double limit_s;
    int expired;
};

static int nsys_progress(void *ctx)
{
    struct nsys_deadline *d = ctx;
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    if (now.tv_sec > d->end.tv_sec || (now.tv_sec == d->end.tv_sec && now.tv_nsec > d->end.tv_nsec))
        d->expired = 1;
    return d->expired; /* non-zero: interrupt */
}

/* Open the export at path read-only and immutable (a URI: no lock, no journal, no -wal or
 * -shm file beside the input, whatever its journal mode), with a schema that runs no
 * function of its own (trusted_schema off) and the deadline *d.  Returns 0, or -1 after
 * error_set() (*db is then closed). */
static int nsys_open(const char *path, sqlite3 **db, struct nsys_deadline *d)
{
    *db = NULL;
    memset(d, 0, sizeof *d);
    struct stat st;
    const double mib = stat(path, &st) == 0 ? (double)st.st_size / 1048576.0 : 0;
    d->limit_s = 60.0 + mib;
    clock_gettime(CLOCK_MONOTONIC, &d->end);
    d->end.tv_sec += (time_t)d->limit_s;
    /* "file:" + the path, percent-encoding what a URI path cannot hold */
    size_t n = strlen(path);
    char *uri = malloc(5 + 3 * n + sizeof "?immutable=1");
    if (!uri)
        return error_set("%s: out of memory", path);
    char *o = uri + sprintf(uri, "file:");
    for (const unsigned char *c = (const unsigned char *)path; *c; c++) {
        if (*c == '%' || *c == '?' || *c == '#' || *c <= ' ' || *c >= 0x7f)
            o += sprintf(o, "%%%02X", *c);
        else
            *o++ = (char)*c;
    }
    strcpy(o, "?immutable=1");
    int rc = sqlite3_open_v2(uri, db, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI, NULL);
    free(uri);
    if (rc != SQLITE_OK) {
        error_set("%s: cannot open it as SQLite (%s)", path,
                  *db ? sqlite3_errmsg(*db) : "out of memory");
        sqlite3_close(*db);
        *db = NULL;
        return -1;
    }
#ifdef SQLITE_DBCONFIG_TRUSTED_SCHEMA
    sqlite3_db_config(*db, SQLITE_DBCONFIG_TRUSTED_SCHEMA, 0, (int *)NULL);
#endif
    sqlite3_progress_handler(*db, NSYS_PROGRESS_OPS, nsys_progress, d);
    if (sqlite3_exec(*db, "SELECT 1 FROM sqlite_master LIMIT 1", NULL, NULL, NULL) != SQLITE_OK) {
        error_set("%s: not an SQLite database (%s)", path, sqlite3_errmsg(*db));
        sqlite3_close(*db);
        *db = NULL;
        return -1;
    }
    return 0;
}

/* The tables this importer reads: nsys exports them as tables.  One of these names that is
 * a view (a view may recurse without end) or anything else is refused. */
static const char *const nsys_tables[] = {
    "NVTX_EVENTS", "StringIds", "ENUM_NSYS_EVENT_TYPE", "TARGET_INFO_SESSION_START_TIME",
    "TARGET_INFO_SYSTEM_ENV", "CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY",
    "CUPTI_ACTIVITY_KIND_MEMSET", "CUPTI_ACTIVITY_KIND_RUNTIME", NULL};

/* ---- the schema ---- */

static int table_exists(sqlite3 *db, const char *table)
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db, "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?1",
                           -1, &st, NULL) != SQLITE_OK)
        return 0;
    sqlite3_bind_text(st, 1, table, -1, SQLITE_STATIC);
    int yes = sqlite3_step(st) == SQLITE_ROW;
    sqlite3_finalize(st);
    return yes;
}

static int column_exists(sqlite3 *db, const char *table, const char *col)
{
    char *q = sqlite3_mprintf("SELECT 1 FROM pragma_table_info(%Q) WHERE name = %Q", table, col);
    sqlite3_stmt *st;
    int yes = 0;
    if (q && sqlite3_prepare_v2(db, q, -1, &st, NULL) == SQLITE_OK) {
        yes = sqlite3_step(st) == SQLITE_ROW;
        sqlite3_finalize(st);
    }
    sqlite3_free(q);
    return yes;
}

/* Every column of cols (NULL-ended) in table, else error_set() naming the first missing. */
static int need_columns(sqlite3 *db, const char *path, const char *table,
                        const char *const *cols)
{
    for (; *cols; cols++)
        if (!column_exists(db, table, *cols))
            return error_set("%s: table %s has no column '%s': an nsys export schema this "
                             "report does not know (it reads nsys 2022.4's and current ones)",
                             path, table, *cols);
    return 0;
}

/* One int64 from a query (def when no row or NULL). */
static int64_t query_i64(sqlite3 *db, const char *sql, int64_t def)
{
    sqlite3_stmt *st;
    int64_t v = def;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
        return def;
    if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_type(st, 0) != SQLITE_NULL)
        v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return v;
}

/* An NVTX event type's id by its name in ENUM_NSYS_EVENT_TYPE, def without one. */
static int64_t event_type(sqlite3 *db, const char *name, int64_t def)
{
    if (!table_exists(db, "ENUM_NSYS_EVENT_TYPE"))
        return def;
    char *q = sqlite3_mprintf("SELECT id FROM ENUM_NSYS_EVENT_TYPE WHERE name = %Q", name);
    int64_t v = q ? query_i64(db, q, def) : def;
    sqlite3_free(q);
    return v;
}

/* ---- one report ---- */

#define NSYS_MAX_DOMAINS 64
#define PID_OF(g) (((g) >> 24) & 0xFFFFFF)
#define TID_OF(g) ((g)&0xFFFFFF)

enum nsys_domain { DOM_OTHER, DOM_DDPPROF, DOM_NCCL };

struct nsys_file {
    const char *path; /* as given */
    sqlite3 *db;
    int64_t base_ns;
    char *host;
    /* the NVTX schema (has_nvtx 0: no NVTX_EVENTS, a report of kernels alone) */
    int has_nvtx, has_text, has_textid, has_domain, has_u64, has_i64, has_json;
    int64_t ev_pushpop, ev_startend, ev_domain, ev_mark;
    /* the rank and world size in the profiled environment (TARGET_INFO_SYSTEM_ENV's
     * DeviceEnvironment: RANK, else SLURM_PROCID, ...; -1 where it says none) */
    int64_t env_rank, env_world;
    int64_t dom_id[NSYS_MAX_DOMAINS];
    enum nsys_domain dom_kind[NSYS_MAX_DOMAINS];
    int ndom;
    /* the device tables present */
    int has_kernel, has_memcpy, has_memset, has_runtime;
    const char *kernel_name; /* shortName or demangledName */
    int kernel_pid, memcpy_pid, memset_pid;
    /* the training processes, in pid order */
    int64_t *pids;
    int npids;
    /* counts for the warnings */
    uint64_t ranges, skipped_ddpprof, bad_ts;
};

static int nsys_schema_device(struct nsys_file *f);

static int nsys_sql_error(struct nsys_file *f, const char *what)
{
    return error_set("%s: SQLite: %s: %s", f->path, what, sqlite3_errmsg(f->db));
}

static int nsys_tables_only(struct nsys_file *f)
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(f->db, "SELECT type FROM sqlite_master WHERE name = ?1 COLLATE NOCASE "
                                  "AND type <> 'table' AND type <> 'index'",
                           -1, &st, NULL) != SQLITE_OK)
        return nsys_sql_error(f, "reading its schema");
    int rc = 0;
    for (const char *const *t = nsys_tables; *t && rc == 0; t++) {
        sqlite3_reset(st);
        sqlite3_bind_text(st, 1, *t, -1, SQLITE_STATIC);
        if (sqlite3_step(st) == SQLITE_ROW)
            rc = error_set("%s: %s is a %s, not a table: Nsight Systems exports hold tables "
                           "(a damaged or hostile file); not read",
                           f->path, *t, (const char *)sqlite3_column_text(st, 0));
    }
    sqlite3_finalize(st);
    return rc;
}

static int nsys_schema(struct nsys_file *f)
{
    sqlite3 *db = f->db;
    f->has_nvtx = table_exists(db, "NVTX_EVENTS");
    if (!f->has_nvtx && table_exists(db, "CUPTI_ACTIVITY_KIND_KERNEL")) {
        report_warn("%s: no NVTX ranges (no table NVTX_EVENTS): kernels only, the whole report "
                    "is one step",
                    f->path);
        return nsys_schema_device(f);
    }
    if (!f->has_nvtx) {
        int any = table_exists(db, "StringIds") || table_exists(db, "TARGET_INFO_SESSION_START_TIME");
        return error_set("%s: no table NVTX_EVENTS (the NVTX ranges: ddpprof's, PyTorch's, "
                         "NCCL's): %s",
                         f->path,
                         any ? "profile with NVTX tracing on (nsys profile -t nvtx,cuda; "
                               "scripts/nsys-profile does)"
                             : "not an Nsight Systems SQLite export (nsys export --type sqlite)");
    }
    static const char *const nvtx_cols[] = {"start", "end", "eventType", "globalTid", NULL};
    if (need_columns(db, f->path, "NVTX_EVENTS", nvtx_cols) < 0)
        return -1;
    f->has_text = column_exists(db, "NVTX_EVENTS", "text");
    f->has_textid = column_exists(db, "NVTX_EVENTS", "textId") && table_exists(db, "StringIds");
    if (!f->has_text && !f->has_textid)
        return error_set("%s: table NVTX_EVENTS has neither 'text' nor 'textId' (with "
                         "StringIds): an nsys export schema this report does not know",
                         f->path);
    f->has_domain = column_exists(db, "NVTX_EVENTS", "domainId");
    f->has_u64 = column_exists(db, "NVTX_EVENTS", "uint64Value");
    f->has_i64 = column_exists(db, "NVTX_EVENTS", "int64Value");
    f->has_json = column_exists(db, "NVTX_EVENTS", "jsonText");
    f->ev_pushpop = event_type(db, "NvtxPushPopRange", 59);
    f->ev_startend = event_type(db, "NvtxStartEndRange", 60);
    f->ev_domain = event_type(db, "NvtxDomainCreate", 75);
    f->ev_mark = event_type(db, "NvtxMark", 34);
    if (f->has_domain && f->has_text) {
        sqlite3_stmt *st;
        char *q = sqlite3_mprintf("SELECT DISTINCT domainId, text FROM NVTX_EVENTS WHERE "
                                  "eventType = %lld AND text IS NOT NULL",
                                  (long long)f->ev_domain);
        if (!q || sqlite3_prepare_v2(db, q, -1, &st, NULL) != SQLITE_OK) {
            sqlite3_free(q);
            return nsys_sql_error(f, "the NVTX domains");
        }
        sqlite3_free(q);
        while (sqlite3_step(st) == SQLITE_ROW && f->ndom < NSYS_MAX_DOMAINS) {
            const char *name = (const char *)sqlite3_column_text(st, 1);
            enum nsys_domain k = DOM_OTHER;
            if (name && strcmp(name, "ddpprof") == 0)
                k = DOM_DDPPROF;
            else if (name && strcasecmp(name, "NCCL") == 0)
                k = DOM_NCCL;
            f->dom_id[f->ndom] = sqlite3_column_int64(st, 0);
            f->dom_kind[f->ndom++] = k;
        }
        sqlite3_finalize(st);
    }
    return nsys_schema_device(f);
}

/* The rank in an environment "A=1;B=2;...": RANK, else SLURM_PROCID, OMPI_COMM_WORLD_RANK,
 * PMI_RANK; the world size likewise (WORLD_SIZE, SLURM_NTASKS, ...).  -1 where none. */
static int64_t env_number(const char *env, const char *const *keys)
{
    for (; *keys; keys++) {
        size_t k = strlen(*keys);
        for (const char *c = env; c && *c; c = strchr(c, ';') ? strchr(c, ';') + 1 : NULL) {
            if (strncmp(c, *keys, k) != 0 || c[k] != '=')
                continue;
            char *end;
            long long v = strtoll(c + k + 1, &end, 10);
            if (end != c + k + 1 && (*end == ';' || *end == 0) && v >= 0 && v < 65536)
                return v;
        }
    }
    return -1;
}

/* The device tables, the host, the session's start, the profiled environment's rank. */
static int nsys_schema_device(struct nsys_file *f)
{
    sqlite3 *db = f->db;
    /* the device tables (absent in a CPU-only report) */
    static const char *const act_cols[] = {"start", "end", "correlationId", NULL};
    f->has_kernel = table_exists(db, "CUPTI_ACTIVITY_KIND_KERNEL");
    if (f->has_kernel) {
        if (need_columns(db, f->path, "CUPTI_ACTIVITY_KIND_KERNEL", act_cols) < 0)
            return -1;
        f->kernel_name = column_exists(db, "CUPTI_ACTIVITY_KIND_KERNEL", "shortName")
                             ? "shortName"
                         : column_exists(db, "CUPTI_ACTIVITY_KIND_KERNEL", "demangledName")
                             ? "demangledName"
                             : NULL;
        if (!f->kernel_name || !table_exists(db, "StringIds"))
            return error_set("%s: table CUPTI_ACTIVITY_KIND_KERNEL has no column 'shortName' "
                             "or 'demangledName' (with StringIds): an nsys export schema this "
                             "report does not know",
                             f->path);
        f->kernel_pid = column_exists(db, "CUPTI_ACTIVITY_KIND_KERNEL", "globalPid");
    }
    f->has_memcpy = table_exists(db, "CUPTI_ACTIVITY_KIND_MEMCPY");
    if (f->has_memcpy && need_columns(db, f->path, "CUPTI_ACTIVITY_KIND_MEMCPY", act_cols) < 0)
        return -1;
    f->memcpy_pid = f->has_memcpy && column_exists(db, "CUPTI_ACTIVITY_KIND_MEMCPY", "globalPid");
    f->has_memset = table_exists(db, "CUPTI_ACTIVITY_KIND_MEMSET");
    if (f->has_memset && need_columns(db, f->path, "CUPTI_ACTIVITY_KIND_MEMSET", act_cols) < 0)
        return -1;
    f->memset_pid = f->has_memset && column_exists(db, "CUPTI_ACTIVITY_KIND_MEMSET", "globalPid");
    f->has_runtime = table_exists(db, "CUPTI_ACTIVITY_KIND_RUNTIME");
    static const char *const rt_cols[] = {"start", "correlationId", "globalTid", NULL};
    if (f->has_runtime && need_columns(db, f->path, "CUPTI_ACTIVITY_KIND_RUNTIME", rt_cols) < 0)
        return -1;
    /* who and when */
    f->base_ns = 0;
    if (table_exists(db, "TARGET_INFO_SESSION_START_TIME") &&
        column_exists(db, "TARGET_INFO_SESSION_START_TIME", "utcEpochNs"))
        f->base_ns = query_i64(db, "SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME", 0);
    if (f->base_ns < 0 || f->base_ns > IMPORT_MAX_TS / 2)
        f->base_ns = 0;
    if (table_exists(db, "TARGET_INFO_SYSTEM_ENV") &&
        column_exists(db, "TARGET_INFO_SYSTEM_ENV", "name") &&
        column_exists(db, "TARGET_INFO_SYSTEM_ENV", "value")) {
        sqlite3_stmt *st;
        if (sqlite3_prepare_v2(db, "SELECT value FROM TARGET_INFO_SYSTEM_ENV WHERE name = "
                                   "'Hostname' LIMIT 1",
                               -1, &st, NULL) == SQLITE_OK) {
            if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_text(st, 0))
                f->host = strdup((const char *)sqlite3_column_text(st, 0));
            sqlite3_finalize(st);
        }
        /* the environment nsys recorded (all of it, or a few variables: nsys decides) */
        if (sqlite3_prepare_v2(db, "SELECT value FROM TARGET_INFO_SYSTEM_ENV WHERE name = "
                                   "'DeviceEnvironment' LIMIT 1",
                               -1, &st, NULL) == SQLITE_OK) {
            if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_text(st, 0)) {
                static const char *const ranks[] = {"RANK", "SLURM_PROCID",
                                                    "OMPI_COMM_WORLD_RANK", "PMI_RANK", NULL};
                static const char *const worlds[] = {"WORLD_SIZE", "SLURM_NTASKS",
                                                     "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", NULL};
                const char *env = (const char *)sqlite3_column_text(st, 0);
                f->env_rank = env_number(env, ranks);
                f->env_world = env_number(env, worlds);
            }
            sqlite3_finalize(st);
        }
    }
    return 0;
}

/* The training processes, in pid order: those with a range that a training step is made
 * of (ddpprof's step/forward/backward/allreduce.bN, PyTorch's ProfilerStep#N,
 * DistributedDataParallel.forward, autograd ops, Optimizer.step, NCCL's collectives) or with
 * kernels; not a launcher's (torchrun, ddpprof's parent) other ranges. */
static int nsys_processes(struct nsys_file *f)
{
    if (!f->has_nvtx && !(f->has_kernel && f->kernel_pid))
        return 0; /* one process: all of the report */
    const char *name = f->has_text && f->has_textid ? "COALESCE(e.text, s.value)"
                       : f->has_text                ? "e.text"
                                                    : "s.value";
    char *q = !f->has_nvtx
        ? sqlite3_mprintf("SELECT DISTINCT (globalPid >> 24) & 16777215 AS p FROM "
                          "CUPTI_ACTIVITY_KIND_KERNEL ORDER BY p")
        : sqlite3_mprintf(
        "SELECT DISTINCT (e.globalTid >> 24) & 16777215 AS p FROM NVTX_EVENTS e %s WHERE "
        "e.eventType IN (%lld, %lld) AND (%s IN ('step', 'forward', 'backward', "
        "'DistributedDataParallel.forward', 'ncclAllReduce', 'ncclBroadcast', "
        "'ncclAllGather', 'ncclReduceScatter', 'ncclReduce') OR %s GLOB 'allreduce.b*' OR "
        "%s GLOB 'ProfilerStep#*' OR %s GLOB 'Optimizer.step#*' OR "
        "%s GLOB 'autograd::engine::evaluate_function: *') %s ORDER BY p",
        f->has_textid ? "LEFT JOIN StringIds s ON s.id = e.textId" : "",
        (long long)f->ev_pushpop, (long long)f->ev_startend, name, name, name, name, name,
        f->has_kernel && f->kernel_pid
            ? "UNION SELECT DISTINCT (globalPid >> 24) & 16777215 FROM CUPTI_ACTIVITY_KIND_KERNEL"
            : "");
    sqlite3_stmt *st;
    if (!q || sqlite3_prepare_v2(f->db, q, -1, &st, NULL) != SQLITE_OK) {
        sqlite3_free(q);
        return nsys_sql_error(f, "the processes");
    }
    sqlite3_free(q);
    size_t cap = 0;
    int rc = 0;
    while (sqlite3_step(st) == SQLITE_ROW) {
        if ((size_t)f->npids + 1 > cap) {
            cap = cap ? 2 * cap : 8;
            int64_t *v = realloc(f->pids, cap * sizeof *v);
            if (!v) {
                rc = error_set("%s: out of memory", f->path);
                break;
            }
            f->pids = v;
        }
        f->pids[f->npids++] = sqlite3_column_int64(st, 0);
    }
    sqlite3_finalize(st);
    return rc;
}

static enum nsys_domain nsys_domain_kind(const struct nsys_file *f, int64_t id)
{
    for (int i = 0; i < f->ndom; i++)
        if (f->dom_id[i] == id)
            return f->dom_kind[i];
    return DOM_OTHER;
}

/* NCCL's NVTX range names: the collective (IMPORT_COLL_NONE: not one). */
static enum import_coll nccl_range_coll(const char *name)
{
    static const struct {
        const char *name;
        enum import_coll coll;
    } names[] = {
        {"ncclAllReduce", IMPORT_COLL_ALL_REDUCE},   {"ncclBroadcast", IMPORT_COLL_BROADCAST},
        {"ncclBcast", IMPORT_COLL_BROADCAST},        {"ncclAllGather", IMPORT_COLL_ALL_GATHER},
        {"ncclReduceScatter", IMPORT_COLL_REDUCE_SCATTER},
        {"ncclReduce", IMPORT_COLL_REDUCE},
    };
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if (strcmp(name, names[i].name) == 0)
            return names[i].coll;
    return IMPORT_COLL_NONE;
}

/* A message size in an extended payload exported as JSON ("Message size [bytes]": N), -1. */
static int64_t json_size(const char *json)
{
    if (!json)
        return -1;
    const char *k = strstr(json, "Message size");
    if (!k)
        k = strstr(json, "\"size\"");
    if (!k)
        return -1;
    const char *c = strchr(k, ':');
    if (!c)
        return -1;
    char *end;
    long long v = strtoll(c + 1, &end, 10);
    return end != c + 1 && v >= 0 ? v : -1;
}

/* ddpprof's domain: its phase names (probes/trace_format.h) as the core's spans; 0 when the
 * range is none the core keeps (setup).  payload: the range's NVTX payload (-1 none); with
 * contract 2 (probes/nvtx.h: the process marked "ddpprof nvtx=2 ...") it is forward's images
 * and every collective's bytes, before it every range's step (so not bytes: left unknown). */
static int ddpprof_span(const char *name, int64_t payload, int contract, struct import_span *sp)
{
    static const struct {
        const char *name;
        enum import_kind kind;
        enum import_coll coll;
    } phases[] = {
        {"step", IMPORT_STEP, IMPORT_COLL_NONE},
        {"data", IMPORT_DATA, IMPORT_COLL_NONE},
        {"forward", IMPORT_FORWARD, IMPORT_COLL_NONE},
        {"backward", IMPORT_BACKWARD, IMPORT_COLL_NONE},
        {"optimizer", IMPORT_OPTIMIZER, IMPORT_COLL_NONE},
        {"eval", IMPORT_EVAL, IMPORT_COLL_NONE},
        {"barrier", IMPORT_COLL, IMPORT_COLL_BARRIER},
        {"comm.allreduce", IMPORT_COLL, IMPORT_COLL_ALL_REDUCE_OTHER},
        {"comm.broadcast", IMPORT_COLL, IMPORT_COLL_BROADCAST},
        {"comm.allgather", IMPORT_COLL, IMPORT_COLL_ALL_GATHER},
        {"comm.reduce_scatter", IMPORT_COLL, IMPORT_COLL_REDUCE_SCATTER},
        {"comm.reduce", IMPORT_COLL, IMPORT_COLL_REDUCE},
    };
    const int64_t quantity = contract >= 2 && payload >= 0 ? payload : -1;
    if (strncmp(name, "allreduce.b", 11) == 0) {
        sp->kind = IMPORT_COLL;
        sp->coll = IMPORT_COLL_ALL_REDUCE;
        sp->val = quantity;
        return 1;
    }
    for (size_t i = 0; i < sizeof phases / sizeof *phases; i++) {
        if (strcmp(name, phases[i].name) != 0)
            continue;
        sp->kind = phases[i].kind;
        sp->coll = phases[i].coll;
        if (sp->kind == IMPORT_STEP)
            sp->val = payload >= 0 && payload <= 1000000000 ? payload : -1;
        else if (sp->kind == IMPORT_COLL || (sp->kind == IMPORT_FORWARD && quantity > 0))
            sp->val = quantity;
        return 1;
    }
    return 0;
}

/* The op name of an NVTX range: torch.autograd.profiler.emit_nvtx appends ", seq = N,
 * op_id = M, sizes = ..." to the op's name. */
static size_t nvtx_op_len(const char *name, size_t len)
{
    const char *comma = strstr(name, ", seq =");
    if (!comma)
        comma = strstr(name, ", op_id =");
    if (!comma)
        comma = strstr(name, ", sizes =");
    return comma ? (size_t)(comma - name) : len;
}

/* ddpprof's rank mark of process pid (all: of the report), "ddpprof nvtx=V rank=R
 * world_size=W" (probes/nvtx.h): V, *rank and *world; 0 when the process made none. */
static int nsys_rank_mark(struct nsys_file *f, int64_t pid, int all, int64_t *rank,
                          int64_t *world)
{
    if (!f->has_nvtx || !f->has_text)
        return 0;
    char *q = sqlite3_mprintf("SELECT text FROM NVTX_EVENTS WHERE eventType = %lld AND text GLOB "
                              "'ddpprof nvtx=*' %s ORDER BY start LIMIT 1",
                              (long long)f->ev_mark,
                              all ? "" : "AND ((globalTid >> 24) & 16777215) = ?1");
    sqlite3_stmt *st;
    int version = 0;
    if (q && sqlite3_prepare_v2(f->db, q, -1, &st, NULL) == SQLITE_OK) {
        if (!all)
            sqlite3_bind_int64(st, 1, pid);
        int v, r, w;
        if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_text(st, 0) &&
            sscanf((const char *)sqlite3_column_text(st, 0), "ddpprof nvtx=%d rank=%d world_size=%d",
                   &v, &r, &w) == 3 &&
            v >= 2 && r >= 0 && w >= 1 && r < w && w <= 65536) {
            version = v;
            *rank = r;
            *world = w;
        }
        sqlite3_finalize(st);
    }
    sqlite3_free(q);
    return version;
}

/* The NVTX ranges of process pid, in start order, as host spans and ops. */
static int nsys_ranges(struct nsys_file *f, struct import_rank *core, int64_t pid, int all,
                       int contract)
{
    if (!f->has_nvtx)
        return 0;
    char *q = sqlite3_mprintf(
        "SELECT e.start, e.\"end\", %s, %s, e.globalTid, %s, %s, e.eventType FROM NVTX_EVENTS e "
        "%s "
        "WHERE e.eventType IN (%lld, %lld) AND e.\"end\" IS NOT NULL %s ORDER BY e.start",
        f->has_text && f->has_textid ? "COALESCE(e.text, s.value)"
        : f->has_text                ? "e.text"
                                     : "s.value",
        f->has_domain ? "e.domainId" : "NULL",
        f->has_u64 && f->has_i64 ? "COALESCE(e.uint64Value, e.int64Value)"
        : f->has_u64             ? "e.uint64Value"
        : f->has_i64             ? "e.int64Value"
                                 : "NULL",
        f->has_json ? "e.jsonText" : "NULL",
        f->has_textid ? "LEFT JOIN StringIds s ON s.id = e.textId" : "",
        (long long)f->ev_pushpop, (long long)f->ev_startend,
        all ? "" : "AND ((e.globalTid >> 24) & 16777215) = ?1");
    sqlite3_stmt *st;
    if (!q || sqlite3_prepare_v2(f->db, q, -1, &st, NULL) != SQLITE_OK) {
        sqlite3_free(q);
        return nsys_sql_error(f, "NVTX_EVENTS");
    }
    sqlite3_free(q);
    if (!all)
        sqlite3_bind_int64(st, 1, pid);
    int rc = 0, step;
    int64_t ddp_steps = 0;
    while (rc == 0 && (step = sqlite3_step(st)) == SQLITE_ROW) {
        const char *name = (const char *)sqlite3_column_text(st, 2);
        if (!name)
            continue;
        int64_t start = sqlite3_column_int64(st, 0), end = sqlite3_column_int64(st, 1);
        if (start < 0 || start > IMPORT_MAX_TS / 2 || end < start ||
            end - start > IMPORT_MAX_DUR) {
            f->bad_ts++;
            continue;
        }
        f->ranges++;
        enum nsys_domain dom = sqlite3_column_type(st, 3) == SQLITE_NULL
                                   ? DOM_OTHER
                                   : nsys_domain_kind(f, sqlite3_column_int64(st, 3));
        int64_t payload =
            sqlite3_column_type(st, 5) == SQLITE_NULL ? -1 : sqlite3_column_int64(st, 5);
        struct import_span sp = {.start_ns = start, .end_ns = end,
                                 .tid = TID_OF(sqlite3_column_int64(st, 4)), .val = -1,
                                 .name = name, .coll = IMPORT_COLL_NONE};
        size_t len = strlen(name);
        /* a start/end range may end on another thread: nested in nothing (ops.h) */
        struct import_op op = {.start_ns = start, .end_ns = end, .tid = sp.tid, .name = name,
                               .name_len = nvtx_op_len(name, len),
                               .async = sqlite3_column_int64(st, 7) == f->ev_startend};
        if ((rc = import_rank_op(core, &op)) < 0) /* every range is an op (ops.csv) */
            break;
        if (dom == DOM_DDPPROF) {
            if (!ddpprof_span(name, payload, contract, &sp)) {
                f->skipped_ddpprof++;
                continue;
            }
            if (sp.kind == IMPORT_STEP && sp.val < 0)
                sp.val = ++ddp_steps;
        } else if (dom == DOM_NCCL) {
            sp.coll = nccl_range_coll(name);
            if (sp.coll == IMPORT_COLL_NONE)
                continue;
            sp.kind = IMPORT_PARAMS;
            sp.val = json_size((const char *)sqlite3_column_text(st, 6));
        } else {
            len = op.name_len;
            int named = pt_name_span(name, len, "", 0, &sp.kind, &sp.coll);
            if (named <= 0)
                continue;
            if (sp.kind == IMPORT_STEP && !pt_name_step(name, len, &sp.val))
                sp.val = -1; /* not a step number: the core counts it */
            if (sp.kind == IMPORT_DIMS)
                continue;
        }
        sp.name_len = len;
        rc = import_rank_span(core, &sp);
    }
    if (rc == 0 && step != SQLITE_DONE)
        rc = nsys_sql_error(f, "reading NVTX_EVENTS");
    sqlite3_finalize(st);
    return rc;
}

/* The CUDA API calls (CUPTI_ACTIVITY_KIND_RUNTIME) of process pid: launches (their
 * correlation ids) and ops. */
static int nsys_launches(struct nsys_file *f, struct import_rank *core, int64_t pid, int all)
{
    if (!f->has_runtime)
        return 0;
    /* every call is an op of ops.csv too, named as nsys stats cudaapisum names it (a
     * "_vNNNN" version tail cut off) */
    int named = column_exists(f->db, "CUPTI_ACTIVITY_KIND_RUNTIME", "nameId") &&
                column_exists(f->db, "CUPTI_ACTIVITY_KIND_RUNTIME", "end") &&
                table_exists(f->db, "StringIds");
    char *q = sqlite3_mprintf(
        "SELECT r.start, r.correlationId, %s, r.globalTid, %s FROM CUPTI_ACTIVITY_KIND_RUNTIME r "
        "%s WHERE 1 %s ORDER BY r.start",
        named ? "r.\"end\"" : "NULL",
        named ? "CASE substr(s.value, -6, 2) WHEN '_v' THEN substr(s.value, 1, "
                "length(s.value) - 6) ELSE s.value END"
              : "NULL",
        named ? "LEFT JOIN StringIds s ON s.id = r.nameId" : "",
        all ? "" : "AND ((r.globalTid >> 24) & 16777215) = ?1");
    sqlite3_stmt *st;
    if (!q || sqlite3_prepare_v2(f->db, q, -1, &st, NULL) != SQLITE_OK) {
        sqlite3_free(q);
        return nsys_sql_error(f, "CUPTI_ACTIVITY_KIND_RUNTIME");
    }
    sqlite3_free(q);
    if (!all)
        sqlite3_bind_int64(st, 1, pid);
    int rc = 0, step;
    while (rc == 0 && (step = sqlite3_step(st)) == SQLITE_ROW) {
        int64_t start = sqlite3_column_int64(st, 0), end = sqlite3_column_int64(st, 2);
        if (sqlite3_column_type(st, 1) != SQLITE_NULL)
            rc = import_rank_launch(core, sqlite3_column_int64(st, 1), start);
        const char *name = (const char *)sqlite3_column_text(st, 4);
        if (rc == 0 && name && start >= 0 && start <= IMPORT_MAX_TS / 2 && end >= start &&
            end - start <= IMPORT_MAX_DUR) {
            struct import_op op = {.start_ns = start, .end_ns = end,
                                   .tid = TID_OF(sqlite3_column_int64(st, 3)), .name = name,
                                   .name_len = strlen(name)};
            rc = import_rank_op(core, &op);
        }
    }
    if (rc == 0 && step != SQLITE_DONE)
        rc = nsys_sql_error(f, "reading CUPTI_ACTIVITY_KIND_RUNTIME");
    sqlite3_finalize(st);
    return rc;
}

/* Kernels, memcpys and memsets of process pid, in start order. */
static int nsys_activity(struct nsys_file *f, struct import_rank *core, int64_t pid, int all)
{
    if (!f->has_kernel && !f->has_memcpy && !f->has_memset)
        return 0;
    char *parts[3] = {NULL, NULL, NULL};
    int np = 0;
    const char *where = all ? "" : "WHERE ((globalPid >> 24) & 16777215) = ?1";
    /* kind 0 kernel, 1 memory */
    if (f->has_kernel)
        parts[np++] = sqlite3_mprintf(
            "SELECT k.start, k.\"end\", k.correlationId, %s, s.value, 0 FROM "
            "CUPTI_ACTIVITY_KIND_KERNEL k LEFT JOIN StringIds s ON s.id = k.%s %s",
            column_exists(f->db, "CUPTI_ACTIVITY_KIND_KERNEL", "streamId") ? "k.streamId"
                                                                           : "-1",
            f->kernel_name, all || !f->kernel_pid ? "" : where);
    /* memory activity named as nsys stats names it (cuda_gpu_mem_time_sum, 2022-2023) */
    if (f->has_memcpy)
        parts[np++] = sqlite3_mprintf(
            "SELECT start, \"end\", correlationId, %s, %s, 1 FROM CUPTI_ACTIVITY_KIND_MEMCPY "
            "%s",
            column_exists(f->db, "CUPTI_ACTIVITY_KIND_MEMCPY", "streamId") ? "streamId" : "-1",
            column_exists(f->db, "CUPTI_ACTIVITY_KIND_MEMCPY", "copyKind")
                ? "CASE copyKind WHEN 1 THEN '[CUDA memcpy HtoD]' WHEN 2 THEN "
                  "'[CUDA memcpy DtoH]' WHEN 8 THEN '[CUDA memcpy DtoD]' WHEN 10 THEN "
                  "'[CUDA memcpy PtoP]' ELSE '[CUDA memcpy]' END"
                : "'[CUDA memcpy]'",
            all || !f->memcpy_pid ? "" : where);
    if (f->has_memset)
        parts[np++] = sqlite3_mprintf(
            "SELECT start, \"end\", correlationId, %s, '[CUDA memset]', 1 FROM "
            "CUPTI_ACTIVITY_KIND_MEMSET %s",
            column_exists(f->db, "CUPTI_ACTIVITY_KIND_MEMSET", "streamId") ? "streamId" : "-1",
            all || !f->memset_pid ? "" : where);
    char *q = NULL;
    int ok = 1;
    for (int i = 0; i < np; i++)
        ok &= parts[i] != NULL;
    if (ok)
        q = sqlite3_mprintf("%s%s%s%s%s ORDER BY 1", parts[0], np > 1 ? " UNION ALL " : "",
                            np > 1 ? parts[1] : "", np > 2 ? " UNION ALL " : "",
                            np > 2 ? parts[2] : "");
    for (int i = 0; i < np; i++)
        sqlite3_free(parts[i]);
    sqlite3_stmt *st;
    if (!q || sqlite3_prepare_v2(f->db, q, -1, &st, NULL) != SQLITE_OK) {
        sqlite3_free(q);
        return nsys_sql_error(f, "the CUPTI activity tables");
    }
    sqlite3_free(q);
    if (!all && sqlite3_bind_parameter_count(st) > 0)
        sqlite3_bind_int64(st, 1, pid);
    int rc = 0, step;
    while (rc == 0 && (step = sqlite3_step(st)) == SQLITE_ROW) {
        int64_t start = sqlite3_column_int64(st, 0), end = sqlite3_column_int64(st, 1);
        if (start < 0 || start > IMPORT_MAX_TS / 2 || end < start ||
            end - start > IMPORT_MAX_DUR) {
            f->bad_ts++;
            continue;
        }
        struct import_activity a = {.start_ns = start, .end_ns = end, .bytes = -1,
                                    .cls = KERNEL_MEMORY, .coll = IMPORT_COLL_NONE,
                                    .stream = sqlite3_column_int64(st, 3)};
        if (sqlite3_column_type(st, 2) != SQLITE_NULL) {
            a.corr = sqlite3_column_int64(st, 2);
            a.has_corr = 1;
        }
        const char *name = (const char *)sqlite3_column_text(st, 4);
        if (name) { /* ops.csv's kernel name */
            a.name = name;
            a.name_len = strlen(name);
        }
        if (sqlite3_column_int(st, 5) == 0) {
            a.cls = KERNEL_COMPUTE;
            int known = 0;
            if (name && pt_name_kernel(name, a.name_len, "", &a.coll, &known)) {
                a.cls = KERNEL_COMM;
                a.unknown_name = !known;
            }
        }
        rc = import_rank_activity(core, &a);
    }
    if (rc == 0 && step != SQLITE_DONE)
        rc = nsys_sql_error(f, "reading the CUPTI activity tables");
    sqlite3_finalize(st);
    return rc;
}

/* One training process of the report as a rank of the sink's run. */
static int nsys_load_rank(struct nsys_file *f, struct import_sink *sink, int64_t pid, int k)
{
    struct import_rank *core = import_rank_begin(sink, f->path);
    if (!core)
        return -1;
    int all = f->npids == 0; /* no training process found: every range, to say so */
    f->ranges = f->skipped_ddpprof = f->bad_ts = 0;
    int64_t mark_rank = -1, mark_world = -1;
    int contract = nsys_rank_mark(f, pid, all, &mark_rank, &mark_world);
    int rc = nsys_ranges(f, core, pid, all, contract);
    if (rc == 0)
        rc = nsys_launches(f, core, pid, all);
    if (rc == 0)
        rc = nsys_activity(f, core, pid, all);
    if (rc == 0)
        rc = import_rank_drain(core);
    if (rc == 0 && import_rank_empty(core))
        rc = error_set("%s%s: none of its %llu NVTX ranges is part of a training step "
                       "(ddpprof's domain, ProfilerStep#N, DistributedDataParallel.forward, "
                       "autograd ops, Optimizer.step, NCCL's ranges) and no kernel: not a "
                       "training run's report?",
                       f->path, f->npids > 1 ? " (a process)" : "", (unsigned long long)f->ranges);
    if (rc == 0) {
        const struct import_counts *c = import_rank_counts(core);
        if (c->unknown_comm)
            report_warn("%s: %llu NCCL kernel(s) named in no known scheme (e.g. '%s'): counted "
                        "as communication in the kernel figures",
                        f->path, (unsigned long long)c->unknown_comm, c->unknown_comm_name);
        import_rank_warn(core);
        if (f->bad_ts)
            report_warn("%s: %llu range(s) or activities with times out of range: skipped",
                        f->path, (unsigned long long)f->bad_ts);
        rc = import_rank_finish(core);
    }
    struct import_rank_info *info = import_rank_info(core);
    info->format = "nsys";
    info->shared_clock = f->base_ns > 0; /* nsys's clock is one per host */
    /* the rank: the profiled environment's RANK (one process per report: a launcher's is no
     * rank's), else ddpprof's rank mark, else the file name (one process) or the pid order */
    int64_t rank = -1;
    if (f->npids <= 1 && f->env_rank >= 0) {
        rank = f->env_rank;
        if (f->env_world > rank) {
            info->has_world = 1;
            info->world_size = f->env_world;
        }
    } else if (contract) {
        rank = mark_rank;
        info->has_world = 1;
        info->world_size = mark_world;
    } else {
        rank = f->npids <= 1 ? nsys_rank_of(f->path) : k;
    }
    info->has_rank = rank >= 0;
    info->rank = rank;
    info->no_rank_why = "no RANK in the environment nsys recorded, no ddpprof rank mark, no "
                        "rankN in the file name (scripts/nsys-profile's <phase>.rank<N>, or "
                        "nsys -o NAME.%q{RANK})";
    info->base_ns = f->base_ns;
    info->devices = f->has_kernel;
    import_rank_set_host(core, f->host ? strdup(f->host) : NULL);
    import_rank_free(core);
    return rc;
}

static int nsys_load(const char *path, struct import_sink *sink)
{
    int tmp = 0;
    char *dbpath = NULL;
    if (has_suffix(path, ".nsys-rep") || has_suffix(path, ".qdrep")) {
        if (!(dbpath = nsys_export(path, &tmp)))
            return -1;
    } else if (!(dbpath = strdup(path))) {
        return error_set("%s: out of memory", path);
    }
    struct nsys_file f = {.path = path, .env_rank = -1, .env_world = -1};
    struct nsys_deadline dl;
    int rc = nsys_open(dbpath, &f.db, &dl);
    if (rc == 0)
        rc = nsys_tables_only(&f);
    if (rc == 0)
        rc = nsys_schema(&f);
    if (rc == 0)
        rc = nsys_processes(&f);
    if (rc == 0 && f.npids > 1)
        report_warn("%s: %d training processes (with a training step's NVTX ranges or kernels): "
                    "one rank each, in pid order",
                    path, f.npids);
    for (int k = 0; rc == 0 && k < (f.npids ? f.npids : 1); k++)
        rc = nsys_load_rank(&f, sink, f.npids ? f.pids[k] : 0, k);
    if (rc < 0 && dl.expired) /* the query's own message says only "interrupted" */
        rc = error_set("%s: reading it took more than %.0f s (the bound for an export of its "
                       "size: 60 s + 1 s per MiB): a damaged or hostile export?",
                       path, dl.limit_s);
    sqlite3_close(f.db);
    if (tmp)
        unlink(dbpath);
    free(dbpath);
    free(f.pids);
    free(f.host);
    return rc;
}

#endif /* DDPPROF_HAVE_SQLITE */

const struct importer importer_nsys = {"Nsight Systems report (SQLite export)", nsys_claims,
                                       nsys_load};
