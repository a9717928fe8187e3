/* trace_writer.c — the per-rank trace file: row formatting, the buffer, flushing, and the
 * fatal-signal handler that writes the buffered whole rows (see trace_writer.h for the
 * ownership protocol between threads and the handler). */
#include "probes/trace_writer.h"

#include "common/error.h"

#include <csv.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

/* buffer owner modes (low 3 bits of state; the owner's thread id above them):
 * TW_HANDLER is a signal handler writing the buffer out (threads wait for it);
 * TW_STOPPED is final (threads drop their rows: the process is dying, or a handler took
 * the buffer from the middle of an append or flush). */
enum { TW_IDLE = 0, TW_APPEND = 1, TW_FLUSH = 2, TW_HANDLER = 3, TW_STOPPED = 4 };
#define TW_MODE(s) ((int)((s) & 7))
#define TW_MAX_WRITERS 16
#define TW_HANDLER_WAIT_MS 100

struct trace_writer {
    pthread_mutex_t mu;       /* serialises threads; never taken by the signal handler */
    int fd;
    pid_t pid;                /* process that opened it (a forked child must not write) */
    char *buf;
    size_t cap, threshold;
    _Atomic uint64_t state;   /* (tid << 3) | mode */
    _Atomic size_t committed; /* bytes of whole rows at the start of buf */
    _Atomic int64_t disk;     /* bytes in the file; the file offset except during a flush */
    _Atomic uint64_t rows, lost;
    /* a row too long for buf (trace_row_bytes > TRACE_ROW_MAX) being written on its own,
     * by a thread owning the buffer in TW_FLUSH with nothing committed: the signal handler
     * finishes it as it finishes a flush */
    _Atomic(const char *) big;
    size_t big_n;
    int slot;                 /* index in tw_registry */
    /* the flusher thread: writes the committed rows every interval_ms, so a rank that is
     * SIGKILLed or hangs loses at most the last interval's rows */
    pthread_mutex_t tick_mu;
    pthread_cond_t tick;      /* CLOCK_MONOTONIC; signalled to stop or to re-time */
    pthread_t flusher;
    int flusher_on, stop;     /* under tick_mu */
    unsigned interval_ms;     /* under tick_mu; 0: no timed flush */
    char cause[160];          /* first reason rows were lost (under mu) */
    char path[4096];
};

/* ------------------------------------------------------------------------------------ */
/* formatting                                                                            */

static char *tw_put_str(char *p, const char *s)
{
    size_t n = strlen(s);
    memcpy(p, s, n);
    return p + n;
}

static char *tw_put_i64(char *p, int64_t v)
{
    char tmp[24];
    int n = 0;
    uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    do {
        tmp[n++] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (v < 0)
        *p++ = '-';
    while (n)
        *p++ = tmp[--n];
    return p;
}

static char *tw_put_u64(char *p, uint64_t u)
{
    char tmp[24];
    int n = 0;
    do {
        tmp[n++] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    while (n)
        *p++ = tmp[--n];
    return p;
}

/* the fixed columns' worst case: 7 signed and 1 unsigned 64-bit numbers, the phase, clock
 * and kind names, 11 commas and the newline */
#define TRACE_ROW_FIXED 256

size_t trace_row_bytes(const struct trace_row *r)
{
    const char *name = r->name ? r->name : phase_name(r->phase);
    return TRACE_ROW_FIXED + 2 * strlen(name) + 2; /* every byte a doubled quote, quoted */
}

size_t trace_format_row(char *buf, size_t cap, const struct trace_row *r)
{
    const char *name = r->name ? r->name : phase_name(r->phase);
    size_t len = strlen(name);
    int quote = 0;
    for (size_t i = 0; i < len && !quote; i++)
        quote = name[i] == ',' || name[i] == '"' || name[i] == '\r' || name[i] == '\n';
    int64_t end = r->end_ns < r->start_ns ? r->start_ns : r->end_ns;
    int clk = (unsigned)r->clock < TRACE_CLOCK_COUNT ? (int)r->clock : TRACE_CLOCK_HOST;
    int kind = (unsigned)r->kind < TRACE_KIND_COUNT ? (int)r->kind : TRACE_KIND_RANGE;

    char *p = buf;
    p = tw_put_i64(p, r->rank);
    *p++ = ',';
    p = tw_put_i64(p, r->step);
    *p++ = ',';
    p = tw_put_i64(p, r->epoch);
    *p++ = ',';
    p = tw_put_str(p, phase_name(r->phase));
    *p++ = ',';
    p = tw_put_i64(p, r->bucket);
    *p++ = ',';
    p = tw_put_str(p, trace_clock_name(clk));
    *p++ = ',';
    p = tw_put_i64(p, r->start_ns);
    *p++ = ',';
    p = tw_put_i64(p, end);
    *p++ = ',';
    p = tw_put_u64(p, r->bytes);
    *p++ = ',';
    if (quote) {
        p += csv_write(p, cap - (size_t)(p - buf) - 32, name, len); /* room: trace_row_bytes */
    } else {
        memcpy(p, name, len);
        p += len;
    }
    *p++ = ',';
    p = tw_put_str(p, trace_kind_name(kind));
    *p++ = ',';
    p = tw_put_i64(p, r->stream);
    *p++ = '\n';
    return (size_t)(p - buf);
}

/* ------------------------------------------------------------------------------------ */
/* ownership of the buffer                                                               */

static __thread pid_t tw_tid_cache;

static void tw_atfork_child(void)
{
    tw_tid_cache = 0; /* the child's thread has a new id */
}

static pid_t tw_tid(void)
{
    if (!tw_tid_cache)
        tw_tid_cache = (pid_t)syscall(SYS_gettid);
    return tw_tid_cache;
}

static uint64_t tw_pack(pid_t tid, int mode)
{
    return ((uint64_t)(uint32_t)tid << 3) | (uint64_t)mode;
}

/* Take the idle buffer for mode (caller holds mu, so no other thread owns it): waits
 * while a signal handler on another thread writes it out; 0 when the writer is stopped. */
static int tw_enter(struct trace_writer *w, int mode)
{
    uint64_t want = tw_pack(tw_tid(), mode);
    for (;;) {
        uint64_t expect = 0;
        if (atomic_compare_exchange_strong(&w->state, &expect, want))
            return 1;
        if (TW_MODE(expect) != TW_HANDLER)
            return 0;
        sched_yield();
    }
}

/* Move the buffer from `from` (owned by this thread) to `to`; 0 when a signal handler
 * took it meanwhile. */
static int tw_move(struct trace_writer *w, int from, int to)
{
    pid_t me = tw_tid();
    uint64_t expect = from == TW_IDLE ? 0 : tw_pack(me, from);
    uint64_t want = to == TW_IDLE ? 0 : tw_pack(me, to);
    return atomic_compare_exchange_strong(&w->state, &expect, want);
}

static void tw_note_loss(struct trace_writer *w, uint64_t rows, const char *cause)
{
    atomic_fetch_add(&w->lost, rows);
    if (!w->cause[0])
        snprintf(w->cause, sizeof w->cause, "%s", cause);
}

static uint64_t tw_count_rows(const char *p, size_t n)
{
    uint64_t rows = 0;
    for (size_t i = 0; i < n; i++)
        rows += p[i] == '\n';
    return rows;
}

/* Write p[0..n) at the file's end, the caller owning the buffer in TW_FLUSH: n, or the
 * bytes that reached the file before a write failed (*err its errno), or -1 when a signal
 * handler took the buffer meanwhile. */
static ssize_t tw_write_owned(struct trace_writer *w, const char *p, size_t n, int *err)
{
    const uint64_t mine = tw_pack(tw_tid(), TW_FLUSH);
    size_t off = 0;
    while (off < n) {
        ssize_t k = write(w->fd, p + off, n - off);
        if (k < 0 && errno == EINTR)
            continue;
        if (atomic_load(&w->state) != mine)
            return -1;
        if (k <= 0) {
            *err = k < 0 ? errno : EIO;
            return (ssize_t)off;
        }
        off += (size_t)k;
    }
    return (ssize_t)n;
}

/* Write the committed rows.  Caller holds mu and owns the buffer in TW_FLUSH. */
static int tw_flush_owned(struct trace_writer *w)
{
    size_t n = atomic_load_explicit(&w->committed, memory_order_relaxed);
    if (n == 0)
        return 0;
    int64_t base = atomic_load_explicit(&w->disk, memory_order_relaxed);
    int e = 0;
    const ssize_t off = tw_write_owned(w, w->buf, n, &e);
    if (off < 0)
        return error_set("trace %s: stopped by a fatal signal", w->path);
    if ((size_t)off < n) {
        /* keep the whole rows of this flush that reached the file, drop the rest: the file
         * ends in a whole row */
        size_t keep = (size_t)off;
        while (keep > 0 && w->buf[keep - 1] != '\n')
            keep--;
        if (ftruncate(w->fd, (off_t)(base + (int64_t)keep)) == 0)
            lseek(w->fd, (off_t)(base + (int64_t)keep), SEEK_SET);
        char why[128];
        snprintf(why, sizeof why, "write failed: %s", strerror(e));
        tw_note_loss(w, tw_count_rows(w->buf + keep, n - keep), why);
        atomic_store_explicit(&w->committed, 0, memory_order_release);
        atomic_store_explicit(&w->disk, base + (int64_t)keep, memory_order_release);
        return error_set("trace %s: %s; %zu of %zu buffered bytes dropped (check free "
                         "space)",
                         w->path, why, n - keep, n);
    }
    /* committed before disk: the handler reads disk first (see tw_handler_flush) */
    atomic_store_explicit(&w->committed, 0, memory_order_release);
    atomic_store_explicit(&w->disk, base + (int64_t)n, memory_order_release);
    return 0;
}

/* ------------------------------------------------------------------------------------ */
/* the registry of open writers and the fatal-signal handler                            */

static _Atomic(struct trace_writer *) tw_registry[TW_MAX_WRITERS];
static pthread_mutex_t tw_registry_mu = PTHREAD_MUTEX_INITIALIZER;
static int tw_open_count;
static const int tw_signals[] = {SIGSEGV, SIGBUS, SIGABRT, SIGTERM, SIGINT};
#define TW_NSIG ((int)(sizeof tw_signals / sizeof tw_signals[0]))
static struct sigaction tw_old_action[TW_NSIG];
static int tw_hooked[TW_NSIG];

static void tw_write_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t k = write(fd, p, n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return;
        p += k;
        n -= (size_t)k;
    }
}

/* Write out w's committed rows from a signal handler.  release: the process may survive
 * (we chain to another handler), so an idle writer is given back afterwards; otherwise it
 * stays stopped, so no thread writes a row after rows that were lost.
 * Async-signal-safe: atomics, getpid, lseek, write, nanosleep only. */
static void tw_handler_flush(struct trace_writer *w, pid_t self, int release)
{
    if (w->pid != getpid())
        return;
    uint64_t s = atomic_load(&w->state);
    int from;
    for (int waited = 0;;) {
        int mode = TW_MODE(s);
        pid_t owner = (pid_t)(s >> 3);
        if (mode == TW_HANDLER || mode == TW_STOPPED)
            return; /* another handler is on it, or was */
        if (mode != TW_FLUSH || owner == self || waited >= TW_HANDLER_WAIT_MS) {
            if (atomic_compare_exchange_strong(&w->state, &s, tw_pack(self, TW_HANDLER))) {
                from = mode;
                break;
            }
            continue; /* s was reloaded */
        }
        struct timespec ms = {0, 1000000};
        nanosleep(&ms, NULL); /* another thread is flushing: let it finish */
        waited++;
        s = atomic_load(&w->state);
    }
    int64_t disk = atomic_load_explicit(&w->disk, memory_order_acquire);
    size_t n = atomic_load_explicit(&w->committed, memory_order_acquire);
    size_t done = 0;
    if (from == TW_FLUSH) {
        off_t pos = lseek(w->fd, 0, SEEK_CUR);
        if (pos > disk)
            done = (size_t)(pos - disk) < n ? (size_t)(pos - disk) : n;
    }
    tw_write_all(w->fd, w->buf + done, n - done);
    const char *big = from == TW_FLUSH ? atomic_load_explicit(&w->big, memory_order_acquire) : NULL;
    if (big) { /* a long row on its own (committed was 0): from where its write got */
        off_t pos = lseek(w->fd, 0, SEEK_CUR);
        size_t bdone = pos > disk ? (size_t)(pos - disk) : 0;
        if (bdone < w->big_n)
            tw_write_all(w->fd, big + bdone, w->big_n - bdone);
    }
    if (from == TW_IDLE && release) {
        /* nobody was in the middle of anything: leave a consistent, usable writer */
        atomic_store(&w->committed, 0);
        atomic_store(&w->disk, disk + (int64_t)n);
        atomic_store(&w->state, 0);
    } else {
        atomic_store(&w->state, tw_pack(self, TW_STOPPED));
    }
}

static void tw_on_signal(int sig, siginfo_t *info, void *uctx)
{
    int saved_errno = errno;
    pid_t self = (pid_t)syscall(SYS_gettid);
    int k = 0;
    while (k < TW_NSIG && tw_signals[k] != sig)
        k++;
    if (k == TW_NSIG)
        return;
    const struct sigaction *old = &tw_old_action[k];
    int chained = (old->sa_flags & SA_SIGINFO) ? old->sa_sigaction != NULL
                                               : old->sa_handler != SIG_DFL &&
                                                     old->sa_handler != SIG_IGN;
    for (int i = 0; i < TW_MAX_WRITERS; i++) {
        struct trace_writer *w = atomic_load(&tw_registry[i]);
        if (w)
            tw_handler_flush(w, self, chained);
    }
    if (old->sa_flags & SA_SIGINFO) {
        if (old->sa_sigaction)
            old->sa_sigaction(sig, info, uctx);
    } else if (old->sa_handler != SIG_DFL && old->sa_handler != SIG_IGN) {
        old->sa_handler(sig);
    } else {
        struct sigaction dfl;
        memset(&dfl, 0, sizeof dfl);
        dfl.sa_handler = SIG_DFL;
        sigemptyset(&dfl.sa_mask);
        sigaction(sig, &dfl, NULL);
        raise(sig); /* blocked until we return, then the default action */
    }
    errno = saved_errno;
}

/* Under tw_registry_mu. */
static void tw_install_handlers(void)
{
    static int atfork_done;
    if (!atfork_done) {
        pthread_atfork(NULL, NULL, tw_atfork_child);
        atfork_done = 1;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = tw_on_signal;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    for (int k = 0; k < TW_NSIG; k++)
        sigaddset(&sa.sa_mask, tw_signals[k]);
    for (int k = 0; k < TW_NSIG; k++) {
        struct sigaction cur;
        tw_hooked[k] = 0;
        if (sigaction(tw_signals[k], NULL, &cur) != 0)
            continue;
        if (!(cur.sa_flags & SA_SIGINFO) && cur.sa_handler == SIG_IGN)
            continue; /* an ignored signal stays ignored */
        if (sigaction(tw_signals[k], &sa, &tw_old_action[k]) == 0)
            tw_hooked[k] = 1;
    }
}

/* Under tw_registry_mu: put back what was there, unless someone replaced our handler. */
static void tw_restore_handlers(void)
{
    for (int k = 0; k < TW_NSIG; k++) {
        struct sigaction cur;
        if (!tw_hooked[k] || sigaction(tw_signals[k], NULL, &cur) != 0)
            continue;
        if ((cur.sa_flags & SA_SIGINFO) && cur.sa_sigaction == tw_on_signal)
            sigaction(tw_signals[k], &tw_old_action[k], NULL);
        tw_hooked[k] = 0;
    }
}

static int tw_register(struct trace_writer *w)
{
    pthread_mutex_lock(&tw_registry_mu);
    int slot = -1;
    for (int i = 0; i < TW_MAX_WRITERS && slot < 0; i++)
        if (!atomic_load(&tw_registry[i]))
            slot = i;
    if (slot >= 0) {
        if (tw_open_count++ == 0)
            tw_install_handlers();
        w->slot = slot;
        atomic_store(&tw_registry[slot], w);
    }
    pthread_mutex_unlock(&tw_registry_mu);
    return slot;
}

static void tw_unregister(struct trace_writer *w)
{
    pthread_mutex_lock(&tw_registry_mu);
    atomic_store(&tw_registry[w->slot], NULL);
    if (--tw_open_count == 0)
        tw_restore_handlers();
    pthread_mutex_unlock(&tw_registry_mu);
}

/* ------------------------------------------------------------------------------------ */
/* the flusher thread                                                                    */

/* Write out what is committed, unless the writer is stopped or has nothing buffered.
 * Takes mu (never held by a signal handler), so it is an ordinary flush. */
static void tw_timed_flush(struct trace_writer *w)
{
    if (atomic_load_explicit(&w->committed, memory_order_acquire) == 0)
        return;
    pthread_mutex_lock(&w->mu);
    if (tw_enter(w, TW_FLUSH)) {
        tw_flush_owned(w); /* a failed write is counted in the writer, reported at close */
        tw_move(w, TW_FLUSH, TW_IDLE);
    }
    pthread_mutex_unlock(&w->mu);
}

static void *tw_flusher_main(void *arg)
{
    struct trace_writer *w = arg;
    pthread_mutex_lock(&w->tick_mu);
    while (!w->stop) {
        struct timespec at;
        clock_gettime(CLOCK_MONOTONIC, &at);
        unsigned ms = w->interval_ms ? w->interval_ms : 3600u * 1000u;
        at.tv_sec += ms / 1000;
        at.tv_nsec += (long)(ms % 1000) * 1000000L;
        if (at.tv_nsec >= 1000000000L) {
            at.tv_sec++;
            at.tv_nsec -= 1000000000L;
        }
        int rc = 0;
        unsigned was = w->interval_ms;
        while (!w->stop && rc != ETIMEDOUT && w->interval_ms == was)
            rc = pthread_cond_timedwait(&w->tick, &w->tick_mu, &at);
        if (w->stop || rc != ETIMEDOUT || !w->interval_ms)
            continue; /* stopping, or re-timed: start the wait again */
        pthread_mutex_unlock(&w->tick_mu);
        tw_timed_flush(w);
        pthread_mutex_lock(&w->tick_mu);
    }
    pthread_mutex_unlock(&w->tick_mu);
    return NULL;
}

/* Start the flusher with every signal blocked in it, so that asynchronous signals
 * (SIGTERM, SIGINT) are handled by the threads that produce rows, never mid-flush here. */
static int tw_flusher_start(struct trace_writer *w)
{
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&w->tick, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_init(&w->tick_mu, NULL);
    w->interval_ms = TRACE_FLUSH_INTERVAL_MS_DEFAULT;
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(&w->flusher, NULL, tw_flusher_main, w);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    w->flusher_on = rc == 0;
    return rc;
}

static void tw_flusher_stop(struct trace_writer *w)
{
    if (w->flusher_on) {
        pthread_mutex_lock(&w->tick_mu);
        w->stop = 1;
        pthread_cond_signal(&w->tick);
        pthread_mutex_unlock(&w->tick_mu);
        pthread_join(w->flusher, NULL);
        w->flusher_on = 0;
    }
    pthread_cond_destroy(&w->tick);
    pthread_mutex_destroy(&w->tick_mu);
}

/* ------------------------------------------------------------------------------------ */
/* public                                                                                */

struct trace_writer *trace_writer_open(const char *dir, int rank, size_t flush_bytes)
{
    struct trace_writer *w = calloc(1, sizeof *w);
    if (!w) {
        error_set("trace writer: out of memory");
        return NULL;
    }
    w->threshold = flush_bytes ? flush_bytes : TRACE_FLUSH_BYTES_DEFAULT;
    w->cap = w->threshold + TRACE_ROW_MAX;
    w->buf = malloc(w->cap);
    w->fd = -1;
    if (!w->buf) {
        free(w);
        error_set("trace writer: out of memory for a %zu-byte buffer", flush_bytes);
        return NULL;
    }
    if ((size_t)snprintf(w->path, sizeof w->path, "%s/" TRACE_FILE_FORMAT, dir, rank) >=
        sizeof w->path) {
        error_set("trace writer: run directory path too long: %s", dir);
        goto fail;
    }
    w->fd = open(w->path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (w->fd < 0) {
        error_set("trace writer: cannot create %s: %s (does the run directory exist and "
                  "is it writable?)", w->path, strerror(errno));
        goto fail;
    }
    size_t hlen = strlen(TRACE_HEADER);
    if (write(w->fd, TRACE_HEADER, hlen) != (ssize_t)hlen) {
        error_set("trace writer: cannot write %s: %s", w->path, strerror(errno));
        goto fail;
    }
    atomic_store(&w->disk, (int64_t)hlen);
    w->pid = getpid();
    pthread_mutex_init(&w->mu, NULL);
    if (tw_register(w) < 0) {
        pthread_mutex_destroy(&w->mu);
        error_set("trace writer: more than %d trace files open in one process", TW_MAX_WRITERS);
        goto fail;
    }
    if (tw_flusher_start(w) != 0) {
        tw_unregister(w);
        pthread_mutex_destroy(&w->mu);
        tw_flusher_stop(w);
        error_set("trace writer: cannot start the flusher thread for %s", w->path);
        goto fail;
    }
    return w;
fail:
    if (w->fd >= 0)
        close(w->fd);
    free(w->buf);
    free(w);
    return NULL;
}

/* A row longer than TRACE_ROW_MAX (its name), formatted in its own buffer and written after
 * the buffered rows, as a flush is: the caller holds mu and owns the buffer in TW_APPEND;
 * it is idle again on return.  A failed write leaves the file at its last whole row. */
static int tw_add_long(struct trace_writer *w, const struct trace_row *row)
{
    const size_t need = trace_row_bytes(row);
    char *line = malloc(need);
    if (!line) {
        tw_move(w, TW_APPEND, TW_IDLE);
        tw_note_loss(w, 1, "out of memory for a long row");
        return error_set("trace %s: out of memory for a %zu-byte row", w->path, need);
    }
    const size_t n = trace_format_row(line, need, row);
    if (!tw_move(w, TW_APPEND, TW_FLUSH)) { /* a signal handler took the buffer */
        free(line);
        tw_note_loss(w, 1, "stopped by a fatal signal");
        return error_set("trace %s: stopped by a fatal signal", w->path);
    }
    int rc = tw_flush_owned(w);
    if (rc == 0) {
        const int64_t base = atomic_load_explicit(&w->disk, memory_order_relaxed);
        w->big_n = n;
        atomic_store_explicit(&w->big, line, memory_order_release);
        int e = 0;
        const ssize_t off = tw_write_owned(w, line, n, &e);
        if (off < 0) /* a handler on another thread finishes the row from `line`: leave it
                      * be (the process is dying) */
            return error_set("trace %s: stopped by a fatal signal", w->path);
        if ((size_t)off < n) {
            if (ftruncate(w->fd, (off_t)base) == 0) /* back to the last whole row */
                lseek(w->fd, (off_t)base, SEEK_SET);
            char why[128];
            snprintf(why, sizeof why, "write failed: %s", strerror(e));
            tw_note_loss(w, 1, why);
            rc = error_set("trace %s: %s; a %zu-byte row dropped (check free space)", w->path,
                           why, n);
        }
        atomic_store_explicit(&w->big, NULL, memory_order_release);
        if (rc == 0) {
            atomic_store_explicit(&w->disk, base + (int64_t)n, memory_order_release);
            atomic_fetch_add_explicit(&w->rows, 1, memory_order_relaxed);
        }
    } else {
        tw_note_loss(w, 1, "an earlier write failed");
    }
    tw_move(w, TW_FLUSH, TW_IDLE);
    free(line);
    return rc;
}

int trace_writer_add(struct trace_writer *w, const struct trace_row *row)
{
    int rc = 0;
    pthread_mutex_lock(&w->mu);
    if (!tw_enter(w, TW_APPEND)) {
        tw_note_loss(w, 1, "stopped by a fatal signal");
        pthread_mutex_unlock(&w->mu);
        return error_set("trace %s: stopped by a fatal signal", w->path);
    }
    if (trace_row_bytes(row) > TRACE_ROW_MAX) {
        rc = tw_add_long(w, row);
        pthread_mutex_unlock(&w->mu);
        return rc;
    }
    size_t c = atomic_load_explicit(&w->committed, memory_order_relaxed);
    size_t n = trace_format_row(w->buf + c, w->cap - c, row); /* c < threshold: fits */
    atomic_store_explicit(&w->committed, c + n, memory_order_release);
    atomic_fetch_add_explicit(&w->rows, 1, memory_order_relaxed);
    if (c + n >= w->threshold) {
        if (tw_move(w, TW_APPEND, TW_FLUSH)) {
            rc = tw_flush_owned(w);
            tw_move(w, TW_FLUSH, TW_IDLE);
        }
    } else {
        tw_move(w, TW_APPEND, TW_IDLE);
    }
    pthread_mutex_unlock(&w->mu);
    return rc;
}

void trace_writer_emit(void *ctx, const struct trace_row *row)
{
    trace_writer_add(ctx, row); /* a loss is counted in the writer and reported at close */
}

void trace_writer_set_flush_interval(struct trace_writer *w, unsigned ms)
{
    pthread_mutex_lock(&w->tick_mu);
    w->interval_ms = ms;
    pthread_cond_signal(&w->tick);
    pthread_mutex_unlock(&w->tick_mu);
}

/* -1 with close's message when rows were lost (under mu, for the cause), else 0 */
static int tw_report_loss(struct trace_writer *w)
{
    uint64_t lost = atomic_load(&w->lost);
    if (!lost)
        return 0;
    return error_set("%s: %llu trace row(s) lost (first cause: %s): the trace is incomplete; "
                     "free disk space and run again",
                     w->path, (unsigned long long)lost, w->cause);
}

int trace_writer_flush(struct trace_writer *w)
{
    int rc;
    pthread_mutex_lock(&w->mu);
    if (tw_enter(w, TW_FLUSH)) {
        rc = tw_flush_owned(w);
        tw_move(w, TW_FLUSH, TW_IDLE);
    } else {
        rc = error_set("trace %s: stopped by a fatal signal", w->path);
    }
    if (rc == 0 && tw_report_loss(w)) /* e.g. the flusher thread's writes failed */
        rc = -1;
    pthread_mutex_unlock(&w->mu);
    return rc;
}

uint64_t trace_writer_rows(const struct trace_writer *w)
{
    return atomic_load(&w->rows);
}

uint64_t trace_writer_lost(const struct trace_writer *w)
{
    return atomic_load(&w->lost);
}

int trace_writer_close(struct trace_writer *w)
{
    if (!w)
        return 0;
    tw_flusher_stop(w);
    int rc = trace_writer_flush(w);
    tw_unregister(w);
    if (close(w->fd) != 0 && rc == 0)
        rc = error_set("trace %s: close failed: %s", w->path, strerror(errno));
    if (tw_report_loss(w))
        rc = -1;
    pthread_mutex_destroy(&w->mu);
    free(w->buf);
    free(w);
    return rc;
}
