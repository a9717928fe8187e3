/* launcher.c — fork the local workers, prefix their output, stop them all if one fails
 * (see launcher.h).
 *
 * One poll() loop watches every worker's stdout and stderr pipe, its link (worker_link.h)
 * and a self-pipe that the SIGCHLD, SIGINT and SIGTERM handlers write to.  Workers are
 * reaped by pid (waitpid WNOHANG, also telling stops and continues), never with
 * waitpid(-1), so the caller's other children are left alone.  Each worker leads its own
 * process group, so stopping it also stops what it forked. */
#include "launch/launcher.h"

#include "common/clock.h"
#include "common/error.h"
#include "common/sha256.h"
#include "comm/flight.h"
#include "comm/store_auth.h"
#include "launch/dist_env.h"
#include "launch/worker_link.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

#define LAUNCHER_LINE_MAX 65536
#define LAUNCHER_OWN_VARS 16
#define LAUNCHER_LINK_FD 3 /* the worker's end of its link, as DDPPROF_LAUNCHER_FD says */
#define LAUNCHER_FDS_PER_WORKER 3 /* kept open here: stdout, stderr and link */
#define LAUNCHER_HOOK_MS 100 /* how often should_stop is asked */
#define LAUNCHER_BLAME_MS 200  /* after an error exit, how long a killed peer may take to show */
#define LAUNCHER_DYING_MS 3000 /* ... and how long one already dying may take to be reaped */
#define LAUNCHER_DRAIN_MS 200       /* after the last worker is reaped, wait this long for EOF */
#define LAUNCHER_DRAIN_KILL_MS 1000 /* then SIGKILL leftovers holding the pipes, wait this long */
#define LAUNCHER_REPEAT_MS 500 /* a signal this soon after the first is the same request (sent to
                                  our process group and to us, or passed on by a parent) */

struct launcher_stream {
    int fd;     /* read end of the worker's pipe; -1 after EOF */
    int out_fd; /* where its lines go: 1 or 2 */
    size_t len; /* bytes of an unfinished line in buf */
    char buf[LAUNCHER_LINE_MAX];
};

struct launcher_worker {
    pid_t pid; /* 0 until started; also its process group id */
    int alive; /* started and not reaped */
    int status;
    char **env; /* envp: the first LAUNCHER_OWN_VARS entries are ours (malloc'd) */
    struct launcher_stream streams[2];
    int link;     /* our end of its link (worker_link.h), -1 when closed */
    int joined, ready; /* it said "joining", "ready" */
    int stop_sig; /* the signal that stopped it (WIFSTOPPED), 0 while it runs */
    char failure[WORKER_LINK_MSG_MAX]; /* what it said in "failed ...", "" if nothing */
};

struct launcher_state {
    int n, grace_ms, rank_base;
    const struct launch_opts *o;
    int asked_stop;     /* should_stop said so */
    char why[512];      /* its reason */
    struct launcher_worker *w;
    char *scratch; /* "[rank N] " + line + "\n" */
    int wake[2];
    int alive; /* workers not yet reaped */
    int stopping, killed;
    int64_t kill_at_ms;
    int failed_rank, failed_status, stopped_others, signal_seen, signals_handled;
    int64_t signal_ms;         /* when the first signal was handled */
    struct launch_result fail; /* the failure being reported (failed_rank >= 0) */
    int nodes;                 /* nnodes (>= 1) */

    /* the rendezvous (launch_opts.rendezvous_ms) */
    int joined, ready;                  /* workers that said "joining", "ready" */
    int64_t first_join_ms, last_join_ms; /* when the first and the last said "joining" */

    /* the job's progress bar, on our stderr (a terminal) */
    int bar_on;         /* launch_opts.progress and stderr is a terminal */
    int bar_shown;      /* a bar is on screen, without its newline */
    char bar[256];
};

static volatile sig_atomic_t launcher_wake_fd = -1;
static volatile sig_atomic_t launcher_first_signal; /* SIGINT or SIGTERM, 0 if none */
static volatile sig_atomic_t launcher_signal_count;

static const int launcher_signals[] = {SIGINT, SIGTERM, SIGCHLD};

static void launcher_describe_status(int status, char *buf, size_t cap);
#define LAUNCHER_NSIGNALS (int)(sizeof launcher_signals / sizeof launcher_signals[0])

static void launcher_on_signal(int sig)
{
    int saved = errno;
    if (sig != SIGCHLD) {
        if (!launcher_first_signal)
            launcher_first_signal = sig;
        launcher_signal_count++;
    }
    if (launcher_wake_fd >= 0) {
        char c = 0;
        ssize_t r = write(launcher_wake_fd, &c, 1);
        (void)r; /* a full pipe already wakes us */
    }
    errno = saved;
}

int launcher_free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return error_set("launcher: cannot create a socket to find a free port: %s",
                         strerror(errno));
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_ANY)};
    socklen_t len = sizeof a;
    if (bind(fd, (struct sockaddr *)&a, sizeof a) < 0 ||
        getsockname(fd, (struct sockaddr *)&a, &len) < 0) {
        int e = errno;
        close(fd);
        return error_set("launcher: cannot find a free TCP port: %s (pick --master-port)",
                         strerror(e));
    }
    close(fd);
    return ntohs(a.sin_port);
}

int launcher_check_fit(int nprocs, int oversubscribe, const char *what)
{
    cpu_set_t allowed;
    long cores = sched_getaffinity(0, sizeof allowed, &allowed) == 0
                     ? CPU_COUNT(&allowed)
                     : sysconf(_SC_NPROCESSORS_ONLN);
    if (cores < 1 || nprocs <= cores || oversubscribe)
        return 0;
    return error_set("%s: %d CPU ranks on %ld core%s would only thrash (every rank computes "
                     "flat out): give at most %ld, or add --oversubscribe to run them anyway",
                     what, nprocs, cores, cores == 1 ? "" : "s", cores);
}

/* ---------------------------------------------------------------- output */

static void launcher_write_all(int fd, const char *p, size_t n)
{
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w > 0) {
            p += w;
            n -= (size_t)w;
        } else if (w < 0 && errno == EINTR) {
            continue;
        } else if (w < 0 && errno == EAGAIN) {
            struct pollfd pfd = {.fd = fd, .events = POLLOUT};
            poll(&pfd, 1, 100);
        } else {
            return; /* our stdout is gone: drop the line, keep babysitting */
        }
    }
}

void launcher_format_bar(char *buf, size_t cap, const struct worker_progress *p)
{
    enum { WIDTH = 30 };
    long long total = p->total > 0 ? p->total : 1;
    long long done = p->done < 0 ? 0 : p->done > total ? total : p->done;
    int fill = (int)(WIDTH * done / total);
    char bar[WIDTH + 1];
    for (int i = 0; i < WIDTH; i++)
        bar[i] = i < fill ? '#' : ' ';
    bar[WIDTH] = '\0';
    snprintf(buf, cap, "  epoch %d/%d [%s] %3d%% %lld/%lld images, loss %.4f", p->epoch,
             p->epochs, bar, (int)(100 * done / total), done, total, p->loss);
}

/* The bar on our stderr: erase it (before a line of output goes out), or draw st->bar. */
static void launcher_bar_erase(struct launcher_state *st)
{
    static const char erase[] = "\r\033[K";
    if (st->bar_shown)
        launcher_write_all(2, erase, sizeof erase - 1);
}

static void launcher_bar_draw(struct launcher_state *st)
{
    if (!st->bar_shown)
        return;
    char line[sizeof st->bar + 8];
    int n = snprintf(line, sizeof line, "\r%s\033[K", st->bar);
    launcher_write_all(2, line, (size_t)n);
}

void launcher_draw_bar(int fd, const struct worker_progress *p)
{
    char bar[256], line[sizeof bar + 8];
    launcher_format_bar(bar, sizeof bar, p);
    int n = snprintf(line, sizeof line, "\r%s\033[K%s", bar, p->done >= p->total ? "\n" : "");
    launcher_write_all(fd, line, (size_t)n);
}

/* Rank 0 says where it is: redraw; an epoch's last step ends the bar's line. */
static void launcher_bar_update(struct launcher_state *st, const struct worker_progress *p)
{
    if (!st->bar_on)
        return;
    launcher_format_bar(st->bar, sizeof st->bar, p); /* kept for redraws between lines */
    launcher_draw_bar(2, p);
    st->bar_shown = p->done < p->total;
}

/* Emit one line (without its newline) as "[rank N] line\n" in one write. */
static void launcher_emit(struct launcher_state *st, int rank, int out_fd, const char *line,
                          size_t n)
{
    int k = snprintf(st->scratch, 32, "[rank %d] ", st->rank_base + rank);
    memcpy(st->scratch + k, line, n);
    st->scratch[k + n] = '\n';
    launcher_bar_erase(st);
    launcher_write_all(out_fd, st->scratch, (size_t)k + n + 1);
    launcher_bar_draw(st);
}

/* Emit the complete lines in s->buf; at_eof also emits an unfinished last line. */
static void launcher_stream_lines(struct launcher_state *st, int rank, struct launcher_stream *s,
                                  int at_eof)
{
    size_t start = 0;
    for (size_t i = 0; i < s->len; i++)
        if (s->buf[i] == '\n') {
            launcher_emit(st, rank, s->out_fd, s->buf + start, i - start);
            start = i + 1;
        }
    if (start < s->len && (at_eof || (start == 0 && s->len == sizeof s->buf))) {
        launcher_emit(st, rank, s->out_fd, s->buf + start, s->len - start);
        start = s->len;
    }
    memmove(s->buf, s->buf + start, s->len - start);
    s->len -= start;
}

static void launcher_stream_close(struct launcher_state *st, int rank, struct launcher_stream *s)
{
    launcher_stream_lines(st, rank, s, 1);
    close(s->fd);
    s->fd = -1;
}

/* One read from a readable stream (one per wake-up, so a chatty worker cannot starve the
 * others). */
static void launcher_stream_read(struct launcher_state *st, int rank, struct launcher_stream *s)
{
    ssize_t n;
    do
        n = read(s->fd, s->buf + s->len, sizeof s->buf - s->len);
    while (n < 0 && errno == EINTR);
    if (n > 0) {
        s->len += (size_t)n;
        launcher_stream_lines(st, rank, s, 0);
    } else if (n == 0 || errno != EAGAIN) {
        launcher_stream_close(st, rank, s);
    }
}

/* ---------------------------------------------------------------- links */

static void launcher_link_message(struct launcher_state *st, int r, char *msg, size_t len)
{
    struct launcher_worker *w = &st->w[r];
    struct worker_msg m;
    int64_t now = clock_now_ms();
    switch (worker_link_parse(msg, len, &m)) {
    case WORKER_MSG_JOINING:
    case WORKER_MSG_READY:
        if (!w->joined) {
            w->joined = 1;
            st->joined++;
            st->last_join_ms = now;
            if (st->joined == 1)
                st->first_join_ms = now;
        }
        if (m.kind == WORKER_MSG_READY && !w->ready) {
            w->ready = 1;
            st->ready++;
        }
        return;
    case WORKER_MSG_PROGRESS:
        if (st->rank_base + r == 0)
            launcher_bar_update(st, &m.progress);
        return;
    case WORKER_MSG_FAILED:
        snprintf(w->failure, sizeof w->failure, "%s", m.text);
        return;
    case WORKER_MSG_UNKNOWN:
        return;
    }
}

/* Read what worker r said on its link: up to max messages (< 0: all there are now).  At
 * EOF the link is closed. */
static void launcher_link_read(struct launcher_state *st, int r, int max)
{
    struct launcher_worker *w = &st->w[r];
    char msg[WORKER_LINK_MSG_MAX + 1];
    for (int i = 0; w->link >= 0 && (max < 0 || i < max);) {
        ssize_t n = recv(w->link, msg, WORKER_LINK_MSG_MAX, MSG_DONTWAIT);
        if (n > 0) {
            launcher_link_message(st, r, msg, (size_t)n);
            i++;
        } else if (n < 0 && errno == EINTR) {
            continue;
        } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            return;
        } else {
            close(w->link); /* EOF: the worker and all it started closed it */
            w->link = -1;
        }
    }
}

/* Poll the wake pipe, every open stream and link for up to timeout_ms; read what is
 * ready. */
static void launcher_poll(struct launcher_state *st, struct pollfd *pfds, int timeout_ms)
{
    int np = 0;
    pfds[np++] = (struct pollfd){.fd = st->wake[0], .events = POLLIN};
    for (int r = 0; r < st->n; r++) {
        for (int k = 0; k < 2; k++)
            if (st->w[r].streams[k].fd >= 0)
                pfds[np++] = (struct pollfd){.fd = st->w[r].streams[k].fd, .events = POLLIN};
        if (st->w[r].link >= 0)
            pfds[np++] = (struct pollfd){.fd = st->w[r].link, .events = POLLIN};
    }
    if (poll(pfds, (nfds_t)np, timeout_ms) <= 0)
        return; /* timeout, or EINTR from a signal whose handler also wrote to wake */
    if (pfds[0].revents) {
        char drain[64];
        while (read(st->wake[0], drain, sizeof drain) > 0)
            ;
    }
    int i = 1;
    for (int r = 0; r < st->n; r++) {
        for (int k = 0; k < 2; k++) {
            struct launcher_stream *s = &st->w[r].streams[k];
            if (s->fd < 0)
                continue;
            if (pfds[i].fd == s->fd && (pfds[i].revents & (POLLIN | POLLHUP | POLLERR)))
                launcher_stream_read(st, r, s);
            i++;
        }
        if (st->w[r].link >= 0) {
            if (pfds[i].fd == st->w[r].link && pfds[i].revents)
                launcher_link_read(st, r, 16);
            i++;
        }
    }
}

/* ---------------------------------------------------------------- workers */

/* Signal a worker's process group (falls back to the pid if the group is gone). */
static void launcher_signal_worker(const struct launcher_worker *w, int sig)
{
    if (kill(-w->pid, sig) < 0)
        kill(w->pid, sig);
}

/* Stop every live worker: SIGTERM, then SIGCONT so that a stopped one (SIGSTOP, ^Z) acts
 * on it now rather than when someone continues it; SIGKILL follows at kill_at_ms. */
static void launcher_begin_stop(struct launcher_state *st)
{
    st->stopping = 1;
    st->kill_at_ms = clock_now_ms() + st->grace_ms;
    st->stopped_others = st->alive;
    for (int r = 0; r < st->n; r++)
        if (st->w[r].alive) {
            launcher_signal_worker(&st->w[r], SIGTERM);
            launcher_signal_worker(&st->w[r], SIGCONT);
        }
}

static void launcher_kill_all(struct launcher_state *st)
{
    st->killed = 1;
    for (int r = 0; r < st->n; r++)
        if (st->w[r].alive)
            launcher_signal_worker(&st->w[r], SIGKILL);
}

/* Reap worker r if it exited; 1 when it did (its status in w->status).  A stop or a
 * continue is noted in w->stop_sig (and told to on_stop_state). */
static int launcher_reap_one(struct launcher_state *st, int r)
{
    struct launcher_worker *w = &st->w[r];
    while (w->alive) {
        int status = 0;
        pid_t p = waitpid(w->pid, &status, WNOHANG | WUNTRACED | WCONTINUED);
        if (p == 0)
            return 0;
        if (p < 0 && errno == EINTR)
            continue;
        if (p > 0 && (WIFSTOPPED(status) || WIFCONTINUED(status))) {
            int sig = WIFSTOPPED(status) ? WSTOPSIG(status) : 0;
            if (sig != w->stop_sig && st->o->on_stop_state)
                st->o->on_stop_state(st->o->hook_ctx, st->rank_base + r, sig);
            w->stop_sig = sig;
            continue;
        }
        if (p < 0)           /* ECHILD: reaped behind our back; its status is lost */
            status = 0x7f00; /* reads as "exit status 127" */
        w->alive = 0;
        w->status = status;
        w->stop_sig = 0;
        st->alive--;
        return 1;
    }
    return 0;
}

const char *launcher_stop_name(int sig, char *buf, size_t cap)
{
    switch (sig) {
    case SIGSTOP: return "SIGSTOP";
    case SIGTSTP: return "SIGTSTP";
    case SIGTTIN: return "SIGTTIN";
    case SIGTTOU: return "SIGTTOU";
    default: snprintf(buf, cap, "signal %d", sig); return buf;
    }
}

/* The local index of global rank g, or -1 when it is on another node. */
static int launcher_local(const struct launcher_state *st, int g)
{
    return g >= st->rank_base && g < st->rank_base + st->n ? g - st->rank_base : -1;
}

/* st->fail for worker `failed` that just failed with status: its fate in words and, when
 * it exited with an error rather than being killed, the culprit: the rank its collective's
 * error names as missing (a stopped one among several first), else a stopped worker of
 * ours. */
static void launcher_blame(struct launcher_state *st, int failed, int status)
{
    struct launch_result *f = &st->fail;
    memset(f, 0, sizeof *f);
    f->failed_rank = st->rank_base + failed;
    f->failed_status = status;
    f->culprit_rank = -1;
    launcher_describe_status(status, f->cause, sizeof f->cause);
    if (WIFSIGNALED(status))
        return; /* it is the culprit itself */
    launcher_link_read(st, failed, -1); /* it exited: all it said is queued */
    struct worker_blame b;
    worker_link_blame(st->w[failed].failure, &b);
    snprintf(f->collective, sizeof f->collective, "%s", b.collective);
    for (int i = 0; i < b.nranks && !b.gone; i++) { /* a rank that failed first is no hang */
        int l = launcher_local(st, b.ranks[i]);
        if (f->culprit_rank < 0 || (l >= 0 && st->w[l].alive && st->w[l].stop_sig)) {
            f->culprit_rank = b.ranks[i];
            f->culprit_stop_sig = l >= 0 && st->w[l].alive ? st->w[l].stop_sig : 0;
        }
        if (f->culprit_stop_sig)
            break;
    }
    for (int r = 0; r < st->n && f->culprit_rank < 0; r++)
        if (r != failed && st->w[r].alive && st->w[r].stop_sig) {
            f->culprit_rank = st->rank_base + r;
            f->culprit_stop_sig = st->w[r].stop_sig;
        }
    if (f->culprit_rank == f->failed_rank)
        f->culprit_rank = -1;
}

static int launcher_failed(int status) { return !WIFEXITED(status) || WEXITSTATUS(status) != 0; }

/* 1 when some live worker is dying: its main thread is already a zombie ('Z' in
 * /proc/PID/stat) while its other threads exit, so waitpid cannot reap it yet. */
static int launcher_any_dying(const struct launcher_state *st)
{
    for (int r = 0; r < st->n; r++) {
        if (!st->w[r].alive)
            continue;
        char path[64], text[512];
        snprintf(path, sizeof path, "/proc/%d/stat", (int)st->w[r].pid);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            continue;
        ssize_t n = read(fd, text, sizeof text - 1);
        close(fd);
        if (n <= 0)
            continue;
        text[n] = '\0';
        const char *p = strrchr(text, ')'); /* the command may hold spaces and parentheses */
        if (p && (p[2] == 'Z' || p[2] == 'X'))
            return 1;
    }
    return 0;
}

/* Worker `failed` failed: note who to blame, tell on_failure, stop the others.  cause
 * (the rendezvous bound: it is alive but late, status 0) replaces its fate in words. */
static void launcher_fail(struct launcher_state *st, int failed, int status, const char *cause)
{
    st->failed_rank = failed;
    st->failed_status = status;
    launcher_blame(st, failed, status);
    if (cause) {
        char sig[32];
        int stop = st->w[failed].stop_sig;
        snprintf(st->fail.cause, sizeof st->fail.cause, "%.100s%s%s%s", cause,
                 stop ? " (stopped by " : "", stop ? launcher_stop_name(stop, sig, sizeof sig) : "",
                 stop ? ")" : "");
        st->fail.culprit_rank = -1;
        st->fail.culprit_stop_sig = 0;
        st->fail.collective[0] = '\0';
    }
    if (st->o->on_failure)
        st->o->on_failure(st->o->hook_ctx, &st->fail);
    launcher_begin_stop(st);
}

/* Reap what exited.  The first failure is named, but a worker killed by a signal is named
 * before one that exited with an error, and one whose error names another that failed is
 * passed over for that one: those most likely exited because it died (a peer
 * gone is an error in every comm), and a dying process (many threads, a large heap) can
 * take longer to be reaped than its peer takes to notice.  So after an error exit the
 * others get LAUNCHER_BLAME_MS to turn out killed before anyone is stopped, and up to
 * LAUNCHER_DYING_MS while one of them is visibly dying. */
static void launcher_reap(struct launcher_state *st)
{
    int failed = -1;
    for (int r = 0; r < st->n; r++)
        if (launcher_reap_one(st, r) && launcher_failed(st->w[r].status) &&
            (failed < 0 || (WIFSIGNALED(st->w[r].status) && !WIFSIGNALED(st->w[failed].status))))
            failed = r;
    if (failed < 0 || st->stopping)
        return;
    int64_t start = clock_now_ms();
    while (!WIFSIGNALED(st->w[failed].status) && st->alive > 0 &&
           (clock_now_ms() < start + LAUNCHER_BLAME_MS ||
            (clock_now_ms() < start + LAUNCHER_DYING_MS && launcher_any_dying(st)))) {
        clock_sleep_ms(10);
        for (int r = 0; r < st->n; r++)
            if (launcher_reap_one(st, r) && WIFSIGNALED(st->w[r].status)) {
                failed = r;
                break;
            }
    }
    /* An error that names another rank of ours which failed too (a peer that died or gave
     * up, rank 0's store gone with rank 0) was caused by that one: name it, following the
     * chain to the first. */
    for (int hops = 0; hops < st->n && !WIFSIGNALED(st->w[failed].status); hops++) {
        launcher_link_read(st, failed, -1);
        struct worker_blame b;
        worker_link_blame(st->w[failed].failure, &b);
        int next = -1;
        for (int i = 0; i < b.nranks && next < 0; i++) {
            int l = launcher_local(st, b.ranks[i]);
            if (l >= 0 && l != failed && !st->w[l].alive && launcher_failed(st->w[l].status))
                next = l;
        }
        if (next < 0)
            break;
        failed = next;
    }
    launcher_fail(st, failed, st->w[failed].status, NULL);
}

/* The rendezvous bound (launch_opts.rendezvous_ms): every worker joins within it of the
 * first, and is ready within it of the last joining.  A late one fails the run. */
static void launcher_check_rendezvous(struct launcher_state *st)
{
    int64_t limit = st->o->rendezvous_ms;
    if (limit <= 0 || st->stopping || !st->joined || st->ready == st->n)
        return;
    int all_joined = st->joined == st->n;
    int64_t since = all_joined ? st->last_join_ms : st->first_join_ms;
    if (clock_now_ms() - since <= limit)
        return;
    int late = -1;
    for (int r = 0; r < st->n && late < 0; r++)
        if (st->w[r].alive && !(all_joined ? st->w[r].ready : st->w[r].joined))
            late = r;
    if (late < 0)
        return; /* the late ones exited: their failure (or not) speaks for them */
    char cause[160];
    snprintf(cause, sizeof cause,
             all_joined ? "did not finish the rendezvous within %.1f s (--timeout) of the last "
                          "rank joining"
                        : "did not join the rendezvous within %.1f s (--timeout) of the first "
                          "rank",
             limit / 1000.0);
    launcher_fail(st, late, 0, cause);
}

static int launcher_env_name_is(const char *entry, const char *name)
{
    size_t n = strcspn(entry, "=");
    return strlen(name) == n && strncmp(entry, name, n) == 0;
}

/* torchrun's variables and the link's (worker_link.h), set for every worker
 * (launcher_env_build's values, in this order) */
static const char *const launcher_own[LAUNCHER_OWN_VARS] = {
    "MASTER_ADDR",      "MASTER_PORT",        "WORLD_SIZE",
    "RANK",             "LOCAL_RANK",         "LOCAL_WORLD_SIZE",
    "GROUP_RANK",       "GROUP_WORLD_SIZE",   "ROLE_RANK",
    "ROLE_WORLD_SIZE",  "TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_MAX_RESTARTS",
    "TORCHELASTIC_RUN_ID", "TORCHELASTIC_USE_AGENT_STORE", WORKER_LINK_ENV,
    STORE_SECRET_ENV};

static int launcher_env_overridden(const char *entry, char *const *extra)
{
    for (int i = 0; i < LAUNCHER_OWN_VARS; i++)
        if (launcher_env_name_is(entry, launcher_own[i]))
            return 1;
    /* the workers' secret is ours (DDPPROF_JOB_SECRET): a file the caller named is not theirs */
    if (launcher_env_name_is(entry, STORE_SECRET_FILE_ENV))
        return 1;
    if (extra)
        for (char *const *e = extra; *e; e++) {
            char name[256];
            size_t n = strcspn(*e, "=");
            if (n >= sizeof name)
                continue;
            memcpy(name, *e, n);
            name[n] = '\0';
            if (launcher_env_name_is(entry, name))
                return 1;
        }
    return 0;
}

static void launcher_env_free(char **env)
{
    if (!env)
        return;
    for (int i = 0; i < LAUNCHER_OWN_VARS; i++) {
        if (env[i])
            mem_wipe(env[i], strlen(env[i])); /* the secret among them */
        free(env[i]);
    }
    free(env);
}

/* envp for one local rank: our variables, the extras, then the caller's environment minus
 * anything those override.  NULL on allocation failure. */
static char **launcher_env_build(const struct launch_opts *o, const char *addr, int port,
                                 int rank, const char *secret)
{
    int world = o->world > 0 ? o->world : o->nprocs, grank = o->rank_base + rank;
    int nnodes = o->nnodes > 0 ? o->nnodes : 1;
    size_t n = 0, extra = 0;
    for (char **e = environ; e && *e; e++)
        n++;
    for (char *const *e = o->env; e && *e; e++)
        extra++;
    char **env = calloc(LAUNCHER_OWN_VARS + extra + n + 1, sizeof *env);
    if (!env)
        return NULL;
    char num[LAUNCHER_OWN_VARS][16];
    const int ints[] = {port, world, grank, rank, o->nprocs, o->node_rank, nnodes, grank, world,
                        o->restart_count, o->max_restarts, LAUNCHER_LINK_FD};
    for (int i = 0; i < 12; i++)
        snprintf(num[i], sizeof num[i], "%d", ints[i]);
    const char *value[LAUNCHER_OWN_VARS] = {addr,   num[0], num[1], num[2],  num[3],
                                            num[4], num[5], num[6], num[7],  num[8],
                                            num[9], num[10], o->run_id ? o->run_id : "none",
                                            "False", num[11], secret};
    for (int i = 0; i < LAUNCHER_OWN_VARS; i++) {
        size_t len = strlen(launcher_own[i]) + strlen(value[i]) + 2;
        if (!(env[i] = malloc(len))) {
            launcher_env_free(env); /* frees the ones made so far (the rest are NULL) */
            return NULL;
        }
        snprintf(env[i], len, "%s=%s", launcher_own[i], value[i]);
    }
    size_t k = LAUNCHER_OWN_VARS;
    for (char *const *e = o->env; e && *e; e++)
        if (!launcher_env_overridden(*e, NULL))
            env[k++] = *e;
    for (char **e = environ; e && *e; e++)
        if (!launcher_env_overridden(*e, o->env))
            env[k++] = *e;
    env[k] = NULL;
    return env;
}

/* Make `from` the child's fd `to`, inheritable across exec. */
static void launcher_child_dup(int from, int to)
{
    if (from == to)
        fcntl(to, F_SETFD, 0);
    else
        dup2(from, to);
}

static void launcher_child_write(const char *s)
{
    launcher_write_all(2, s, strlen(s));
}

/* In the forked child: never returns. */
static _Noreturn void launcher_child(const struct launch_opts *o, char **env, pid_t parent,
                                     int devnull, int out_w, int err_w, int link_w,
                                     const struct sigaction *old_actions, const sigset_t *mask)
{
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != parent)
        _exit(126); /* the launcher is already gone */
    setpgid(0, 0);
    /* the link above the descriptors about to be replaced, then at LAUNCHER_LINK_FD */
    int link = fcntl(link_w, F_DUPFD_CLOEXEC, LAUNCHER_LINK_FD + 1);
    launcher_child_dup(devnull, 0);
    launcher_child_dup(out_w, 1);
    launcher_child_dup(err_w, 2);
    if (link >= 0)
        launcher_child_dup(link, LAUNCHER_LINK_FD);
    for (int i = 0; i < LAUNCHER_NSIGNALS; i++) {
        struct sigaction sa = {.sa_handler =
                                   old_actions[i].sa_handler == SIG_IGN ? SIG_IGN : SIG_DFL};
        sigemptyset(&sa.sa_mask);
        sigaction(launcher_signals[i], &sa, NULL);
    }
    sigprocmask(SIG_SETMASK, mask, NULL);
    execve(o->argv[0], o->argv, env);
    int e = errno;
    launcher_child_write("ddpprof: cannot execute ");
    launcher_child_write(o->argv[0]);
    launcher_child_write(": ");
    launcher_child_write(strerror(e));
    launcher_child_write("\n");
    _exit(127);
}

static void launcher_describe_status(int status, char *buf, size_t cap)
{
    if (WIFEXITED(status))
        snprintf(buf, cap, "exit status %d", WEXITSTATUS(status));
    else if (WIFSIGNALED(status))
        snprintf(buf, cap, "killed by signal %d: %s%s", WTERMSIG(status),
                 strsignal(WTERMSIG(status)), WCOREDUMP(status) ? ", core dumped" : "");
    else
        snprintf(buf, cap, "wait status 0x%x", status);
}

/* Start worker r.  0 or -1 (error_set). */
static int launcher_start(struct launcher_state *st, const struct launch_opts *o, int r,
                          int devnull, const struct sigaction *old_actions,
                          const sigset_t *run_mask)
{
    struct launcher_worker *w = &st->w[r];
    int out[2] = {-1, -1}, err[2] = {-1, -1}, link[2] = {-1, -1};
    if (pipe2(out, O_CLOEXEC) < 0 || pipe2(err, O_CLOEXEC) < 0 ||
        socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, link) < 0) {
        int e = errno;
        for (int i = 0; i < 2; i++) {
            if (out[i] >= 0)
                close(out[i]);
            if (err[i] >= 0)
                close(err[i]);
            if (link[i] >= 0)
                close(link[i]);
        }
        return error_set("launcher: cannot create pipes for rank %d: %s", st->rank_base + r,
                         strerror(e));
    }
    sigset_t block;
    sigemptyset(&block);
    for (int i = 0; i < LAUNCHER_NSIGNALS; i++)
        sigaddset(&block, launcher_signals[i]);
    sigprocmask(SIG_BLOCK, &block, NULL); /* no handler of ours may run in the child */
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid == 0)
        launcher_child(o, w->env, parent, devnull, out[1], err[1], link[1], old_actions,
                       run_mask);
    int fork_errno = errno;
    sigprocmask(SIG_SETMASK, run_mask, NULL);
    close(out[1]);
    close(err[1]);
    close(link[1]);
    if (pid < 0) {
        close(out[0]);
        close(err[0]);
        close(link[0]);
        return error_set("launcher: cannot fork rank %d: %s", st->rank_base + r,
                         strerror(fork_errno));
    }
    setpgid(pid, pid); /* also done by the child; whichever runs first wins, both agree */
    w->pid = pid;
    w->alive = 1;
    st->alive++;
    w->streams[0].fd = out[0];
    w->streams[0].out_fd = 1;
    w->streams[1].fd = err[0];
    w->streams[1].out_fd = 2;
    w->link = link[0];
    for (int k = 0; k < 2; k++)
        fcntl(w->streams[k].fd, F_SETFL, fcntl(w->streams[k].fd, F_GETFL) | O_NONBLOCK);
    return 0;
}

/* After the last worker is reaped: read the pipes to EOF.  Something a worker forked may
 * still hold them; give it LAUNCHER_DRAIN_MS, then SIGKILL the worker's process group. */
static void launcher_drain(struct launcher_state *st, struct pollfd *pfds)
{
    int64_t until = clock_now_ms() + LAUNCHER_DRAIN_MS;
    int escalated = 0;
    for (;;) {
        int open = 0;
        for (int r = 0; r < st->n; r++)
            open += (st->w[r].streams[0].fd >= 0) + (st->w[r].streams[1].fd >= 0);
        if (!open)
            return;
        int64_t left = until - clock_now_ms();
        if (left <= 0 && escalated)
            break;
        if (left <= 0) {
            for (int r = 0; r < st->n; r++)
                if (st->w[r].streams[0].fd >= 0 || st->w[r].streams[1].fd >= 0)
                    kill(-st->w[r].pid, SIGKILL);
            escalated = 1;
            until = clock_now_ms() + LAUNCHER_DRAIN_KILL_MS;
            continue;
        }
        launcher_poll(st, pfds, (int)left);
    }
    for (int r = 0; r < st->n; r++)
        for (int k = 0; k < 2; k++)
            if (st->w[r].streams[k].fd >= 0)
                launcher_stream_close(st, r, &st->w[r].streams[k]);
}

static void launcher_supervise(struct launcher_state *st, struct pollfd *pfds)
{
    int64_t next_ask = clock_now_ms();
    while (st->alive > 0) {
        /* a safety net: SIGCHLD and signals wake the poll sooner; the agent's question is
         * asked every LAUNCHER_HOOK_MS */
        int timeout = st->o->should_stop ? LAUNCHER_HOOK_MS : 500;
        if (st->stopping && !st->killed) {
            int64_t left = st->kill_at_ms - clock_now_ms();
            timeout = left < 0 ? 0 : left < timeout ? (int)left : timeout;
        }
        launcher_poll(st, pfds, timeout);
        launcher_reap(st);
        int count = launcher_signal_count;
        if (count > st->signals_handled) {
            st->signals_handled = count;
            if (!st->signal_seen) {
                st->signal_seen = launcher_first_signal;
                st->signal_ms = clock_now_ms();
            }
            if (!st->stopping)
                launcher_begin_stop(st);
            else if (!st->killed && clock_now_ms() - st->signal_ms >= LAUNCHER_REPEAT_MS)
                launcher_kill_all(st); /* asked again while stopping: no more grace */
        }
        if (!st->stopping && st->o->should_stop && clock_now_ms() >= next_ask) {
            next_ask = clock_now_ms() + LAUNCHER_HOOK_MS;
            if (st->o->should_stop(st->o->hook_ctx, st->why, sizeof st->why)) {
                st->asked_stop = 1;
                launcher_begin_stop(st);
            }
        }
        launcher_check_rendezvous(st);
        if (st->stopping && !st->killed && clock_now_ms() >= st->kill_at_ms)
            launcher_kill_all(st);
    }
}

/* Room for LAUNCHER_FDS_PER_WORKER descriptors per worker (raising our soft limit up to
 * the hard one if needed).  0 or -1 (error_set). */
static int launcher_reserve_fds(int nprocs)
{
    struct rlimit rl;
    rlim_t need = (rlim_t)nprocs * LAUNCHER_FDS_PER_WORKER + 64;
    if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur >= need)
        return 0;
    if (rl.rlim_max == RLIM_INFINITY || rl.rlim_max >= need) {
        rl.rlim_cur = need;
        if (setrlimit(RLIMIT_NOFILE, &rl) == 0)
            return 0;
    }
    return error_set("launcher: %d workers need about %llu open files, but this process may "
                     "open %llu (ulimit -n): raise it or start fewer ranks",
                     nprocs, (unsigned long long)need, (unsigned long long)rl.rlim_cur);
}

/* The one line saying how the run failed (st->fail), to stderr. */
static void launcher_say_failure(const struct launcher_state *st)
{
    const struct launch_result *f = &st->fail;
    char stopped[96] = "", who[64], sig[32];
    if (st->stopped_others) /* a rank late for the rendezvous was stopped too */
        snprintf(stopped, sizeof stopped, "; stopped the %s%d rank(s)%s",
                 st->failed_status ? "other " : "", st->stopped_others,
                 st->nodes > 1 ? " on this node" : "");
    if (f->culprit_rank < 0) {
        fprintf(stderr, "ddpprof: rank %d %s%s%s%s\n", f->failed_rank,
                st->failed_status ? "failed (" : "", f->cause, st->failed_status ? ")" : "",
                stopped);
        return;
    }
    snprintf(who, sizeof who, "rank %d", f->culprit_rank);
    if (launcher_local(st, f->culprit_rank) < 0 && st->n > 0)
        snprintf(who, sizeof who, "rank %d (node %d)", f->culprit_rank,
                 f->culprit_rank / st->n);
    fprintf(stderr, "ddpprof: %s did not arrive%s%s%s%s%s; rank %d failed waiting for it (%s)%s\n",
            who, f->collective[0] ? " in " : "", f->collective,
            f->culprit_stop_sig ? " (stopped by " : "",
            f->culprit_stop_sig ? launcher_stop_name(f->culprit_stop_sig, sig, sizeof sig) : "",
            f->culprit_stop_sig ? ")" : "", f->failed_rank, f->cause, stopped);
}

/* After a failure: where each local rank's flight recorder says it was, one line (nothing
 * when no rank left a flight file). */
static void launcher_say_flight(const struct launcher_state *st)
{
    const char *dir = st->o->flight_dir;
    if (!dir || !*dir)
        return;
    char line[1024] = "";
    size_t len = 0;
    int found = 0;
    for (int i = 0; i < st->n && len < sizeof line - 200; i++) {
        char where[160];
        int rank = st->rank_base + i;
        if (!flight_file_position(dir, rank, where, sizeof where))
            continue;
        len += (size_t)snprintf(line + len, sizeof line - len, "%srank %d %s %s",
                                found ? ", " : "", rank, found ? "in" : "is in", where);
        found++;
    }
    if (found)
        fprintf(stderr, "ddpprof: flight recorder: %s (rank<N>.flight.csv in %s)\n", line, dir);
}

int launcher_run(const struct launch_opts *o)
{
    if (!o || o->nprocs < 1 || !o->argv || !o->argv[0])
        return error_set("launcher: need at least 1 worker and a command (got %d)",
                         o ? o->nprocs : 0);
    int port = o->master_port ? o->master_port : launcher_free_port();
    if (port < 0)
        return -1;
    if (port < 1 || port > 65535)
        return error_set("launcher: master port %d is not in 1..65535", port);
    const char *addr = o->master_addr && *o->master_addr ? o->master_addr : DIST_ENV_DEFAULT_ADDR;

    if (launcher_reserve_fds(o->nprocs))
        return -1;

    struct launcher_state st = {.n = o->nprocs,
                                .o = o,
                                .rank_base = o->rank_base,
                                .grace_ms =
                                    o->grace_ms > 0 ? o->grace_ms : LAUNCHER_DEFAULT_GRACE_MS,
                                .wake = {-1, -1},
                                .failed_rank = -1,
                                .nodes = o->nnodes > 1 ? o->nnodes : 1,
                                .bar_on = o->progress && isatty(STDERR_FILENO)};
    int rc = -1, devnull = -1, installed = 0;
    char secret[STORE_SECRET_MAX + 1] = "";
    struct sigaction old_actions[LAUNCHER_NSIGNALS];
    sigset_t old_mask;
    sigprocmask(SIG_SETMASK, NULL, &old_mask);
    struct pollfd *pfds = calloc(3 * (size_t)o->nprocs + 1, sizeof *pfds);
    st.w = calloc((size_t)o->nprocs, sizeof *st.w);
    st.scratch = malloc(LAUNCHER_LINE_MAX + 32);
    if (!pfds || !st.w || !st.scratch) {
        error_set("launcher: out of memory for %d workers", o->nprocs);
        goto out;
    }
    /* the job's secret, for its store (comm/store_auth.h): the caller's (every node's
     * agent has the same), or a fresh one; in the workers' environment, never their
     * command line, which every user of the host can read */
    if (o->secret && strlen(o->secret) >= sizeof secret) {
        error_set("launcher: the job secret is %zu bytes, more than %d", strlen(o->secret),
                  STORE_SECRET_MAX);
        goto out;
    }
    if (o->secret)
        memcpy(secret, o->secret, strlen(o->secret) + 1);
    else if (store_auth_new_secret(secret))
        goto out;
    for (int r = 0; r < st.n; r++) {
        st.w[r].streams[0].fd = st.w[r].streams[1].fd = st.w[r].link = -1;
        if (!(st.w[r].env = launcher_env_build(o, addr, port, r, secret))) {
            error_set("launcher: out of memory building the environment of rank %d", r);
            goto out;
        }
    }
    devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (devnull < 0) {
        error_set("launcher: cannot open /dev/null: %s", strerror(errno));
        goto out;
    }
    if (pipe2(st.wake, O_CLOEXEC | O_NONBLOCK) < 0) {
        error_set("launcher: cannot create a pipe: %s", strerror(errno));
        goto out;
    }

    launcher_first_signal = 0;
    launcher_signal_count = 0;
    launcher_wake_fd = st.wake[1];
    for (int i = 0; i < LAUNCHER_NSIGNALS; i++) {
        /* SIGCHLD also for a worker stopped or continued: the blame needs to know */
        struct sigaction sa = {.sa_handler = launcher_on_signal, .sa_flags = SA_RESTART};
        sigemptyset(&sa.sa_mask);
        sigaction(launcher_signals[i], &sa, &old_actions[i]);
    }
    installed = 1;
    sigset_t run_mask = old_mask; /* a caller that blocks them would leave us deaf */
    for (int i = 0; i < LAUNCHER_NSIGNALS; i++)
        sigdelset(&run_mask, launcher_signals[i]);
    sigprocmask(SIG_SETMASK, &run_mask, NULL);
    fflush(NULL); /* our buffered output first, then the workers' */

    /* one by one; between two, what exited is reaped and what was said is read, and a
     * failure or a signal ends the starting (supervise then stops the ones running) */
    for (int r = 0; r < st.n && !st.stopping && launcher_signal_count == 0; r++) {
        if (launcher_start(&st, o, r, devnull, old_actions, &run_mask) < 0) {
            /* stop and reap the ones already running, then report the start failure */
            for (int q = 0; q < r; q++)
                if (st.w[q].alive)
                    launcher_signal_worker(&st.w[q], SIGKILL);
            for (int q = 0; q < r; q++)
                while (st.w[q].alive && waitpid(st.w[q].pid, NULL, 0) < 0 && errno == EINTR)
                    ;
            for (int q = 0; q < r; q++)
                for (int k = 0; k < 2; k++)
                    if (st.w[q].streams[k].fd >= 0)
                        launcher_stream_close(&st, q, &st.w[q].streams[k]);
            goto out;
        }
        launcher_poll(&st, pfds, 0);
        launcher_reap(&st);
    }

    launcher_supervise(&st, pfds);
    launcher_drain(&st, pfds);

    if (st.bar_shown) { /* the bar's line ends before the summary */
        launcher_write_all(2, "\n", 1);
        st.bar_shown = 0;
    }
    if (o->result) {
        memset(o->result, 0, sizeof *o->result);
        o->result->failed_rank = o->result->culprit_rank = -1;
    }
    if (st.failed_rank >= 0) {
        launcher_say_failure(&st);
        launcher_say_flight(&st);
        if (o->result)
            *o->result = st.fail;
        rc = 1;
    } else if (st.asked_stop) {
        fprintf(stderr, "ddpprof: %s; stopped the %d rank(s) on this node\n", st.why,
                st.stopped_others);
        if (o->result) {
            o->result->stopped = 1;
            snprintf(o->result->why, sizeof o->result->why, "%s", st.why);
        }
        rc = 1;
    } else if (st.signal_seen) {
        fprintf(stderr, "ddpprof: interrupted by %s; stopped %d rank(s)\n",
                st.signal_seen == SIGINT ? "SIGINT" : "SIGTERM", st.stopped_others);
        rc = 128 + st.signal_seen;
    } else {
        rc = 0;
    }

out:
    if (installed) {
        sigprocmask(SIG_SETMASK, &old_mask, NULL);
        for (int i = 0; i < LAUNCHER_NSIGNALS; i++)
            sigaction(launcher_signals[i], &old_actions[i], NULL);
        launcher_wake_fd = -1;
    }
    for (int i = 0; i < 2; i++)
        if (st.wake[i] >= 0)
            close(st.wake[i]);
    if (devnull >= 0)
        close(devnull);
    if (st.w)
        for (int r = 0; r < st.n; r++) {
            launcher_env_free(st.w[r].env);
            if (st.w[r].link >= 0)
                close(st.w[r].link);
        }
    free(st.w);
    free(st.scratch);
    free(pfds);
    mem_wipe(secret, sizeof secret);
    return rc;
}
