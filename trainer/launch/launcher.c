/* launcher.c — fork the local workers, prefix their output, stop them all if one fails
 * (see launcher.h).
 *
 * One poll() loop watches every worker's stdout and stderr pipe and a self-pipe that the
 * SIGCHLD, SIGINT and SIGTERM handlers write to.  Workers are reaped by pid (waitpid
 * WNOHANG), never with waitpid(-1), so the caller's other children are left alone.  Each
 * worker leads its own process group, so stopping it also stops what it forked. */
#include "launch/launcher.h"

#include "common/clock.h"
#include "common/error.h"
#include "launch/dist_env.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

#define LAUNCHER_LINE_MAX 65536
#define LAUNCHER_OWN_VARS 14
#define LAUNCHER_HOOK_MS 100 /* how often should_stop is asked */
#define LAUNCHER_BLAME_MS 200  /* after an error exit, how long a killed peer may take to show */
#define LAUNCHER_DYING_MS 3000 /* ... and how long one already dying may take to be reaped */
#define LAUNCHER_DRAIN_MS 200       /* after the last worker is reaped, wait this long for EOF */
#define LAUNCHER_DRAIN_KILL_MS 1000 /* then SIGKILL leftovers holding the pipes, wait this long */

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

/* Emit one line (without its newline) as "[rank N] line\n" in one write. */
static void launcher_emit(struct launcher_state *st, int rank, int out_fd, const char *line,
                          size_t n)
{
    int k = snprintf(st->scratch, 32, "[rank %d] ", st->rank_base + rank);
    memcpy(st->scratch + k, line, n);
    st->scratch[k + n] = '\n';
    launcher_write_all(out_fd, st->scratch, (size_t)k + n + 1);
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

/* Poll the wake pipe and every open stream for up to timeout_ms; read what is ready. */
static void launcher_poll(struct launcher_state *st, struct pollfd *pfds, int timeout_ms)
{
    int np = 0;
    pfds[np++] = (struct pollfd){.fd = st->wake[0], .events = POLLIN};
    for (int r = 0; r < st->n; r++)
        for (int k = 0; k < 2; k++)
            if (st->w[r].streams[k].fd >= 0)
                pfds[np++] = (struct pollfd){.fd = st->w[r].streams[k].fd, .events = POLLIN};
    if (poll(pfds, (nfds_t)np, timeout_ms) <= 0)
        return; /* timeout, or EINTR from a signal whose handler also wrote to wake */
    if (pfds[0].revents) {
        char drain[64];
        while (read(st->wake[0], drain, sizeof drain) > 0)
            ;
    }
    int i = 1;
    for (int r = 0; r < st->n; r++)
        for (int k = 0; k < 2; k++) {
            struct launcher_stream *s = &st->w[r].streams[k];
            if (s->fd < 0)
                continue;
            if (pfds[i].fd == s->fd && (pfds[i].revents & (POLLIN | POLLHUP | POLLERR)))
                launcher_stream_read(st, r, s);
            i++;
        }
}

/* ---------------------------------------------------------------- workers */

/* Signal a worker's process group (falls back to the pid if the group is gone). */
static void launcher_signal_worker(const struct launcher_worker *w, int sig)
{
    if (kill(-w->pid, sig) < 0)
        kill(w->pid, sig);
}

static void launcher_begin_stop(struct launcher_state *st)
{
    st->stopping = 1;
    st->kill_at_ms = clock_now_ms() + st->grace_ms;
    st->stopped_others = st->alive;
    for (int r = 0; r < st->n; r++)
        if (st->w[r].alive)
            launcher_signal_worker(&st->w[r], SIGTERM);
}

static void launcher_kill_all(struct launcher_state *st)
{
    st->killed = 1;
    for (int r = 0; r < st->n; r++)
        if (st->w[r].alive)
            launcher_signal_worker(&st->w[r], SIGKILL);
}

/* Reap worker r if it exited; 1 when it did (its status in w->status). */
static int launcher_reap_one(struct launcher_state *st, int r)
{
    struct launcher_worker *w = &st->w[r];
    if (!w->alive)
        return 0;
    int status = 0;
    pid_t p = waitpid(w->pid, &status, WNOHANG);
    if (p == 0 || (p < 0 && errno == EINTR))
        return 0;
    if (p < 0)           /* ECHILD: reaped behind our back; its status is lost */
        status = 0x7f00; /* reads as "exit status 127" */
    w->alive = 0;
    w->status = status;
    st->alive--;
    return 1;
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

/* Reap what exited.  The first failure is named, but a worker killed by a signal is named
 * before one that exited with an error: those most likely exited because it died (a peer
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
    int status = st->w[failed].status;
    st->failed_rank = failed;
    st->failed_status = status;
    if (st->o->on_failure) {
        char why[128];
        launcher_describe_status(status, why, sizeof why);
        st->o->on_failure(st->o->hook_ctx, st->rank_base + failed, status, why);
    }
    launcher_begin_stop(st);
}

static int launcher_env_name_is(const char *entry, const char *name)
{
    size_t n = strcspn(entry, "=");
    return strlen(name) == n && strncmp(entry, name, n) == 0;
}

/* torchrun's variables, set for every worker (launcher_env_build's values, in this order) */
static const char *const launcher_own[LAUNCHER_OWN_VARS] = {
    "MASTER_ADDR",      "MASTER_PORT",        "WORLD_SIZE",
    "RANK",             "LOCAL_RANK",         "LOCAL_WORLD_SIZE",
    "GROUP_RANK",       "GROUP_WORLD_SIZE",   "ROLE_RANK",
    "ROLE_WORLD_SIZE",  "TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_MAX_RESTARTS",
    "TORCHELASTIC_RUN_ID", "TORCHELASTIC_USE_AGENT_STORE"};

static int launcher_env_overridden(const char *entry, char *const *extra)
{
    for (int i = 0; i < LAUNCHER_OWN_VARS; i++)
        if (launcher_env_name_is(entry, launcher_own[i]))
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
    for (int i = 0; i < LAUNCHER_OWN_VARS; i++)
        free(env[i]);
    free(env);
}

/* envp for one local rank: our variables, the extras, then the caller's environment minus
 * anything those override.  NULL on allocation failure. */
static char **launcher_env_build(const struct launch_opts *o, const char *addr, int port, int rank)
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
                        o->restart_count, o->max_restarts};
    for (int i = 0; i < 11; i++)
        snprintf(num[i], sizeof num[i], "%d", ints[i]);
    const char *value[LAUNCHER_OWN_VARS] = {addr,   num[0], num[1], num[2],  num[3],
                                            num[4], num[5], num[6], num[7],  num[8],
                                            num[9], num[10], o->run_id ? o->run_id : "none",
                                            "False"};
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
                                     int devnull, int out_w, int err_w,
                                     const struct sigaction *old_actions, const sigset_t *mask)
{
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != parent)
        _exit(126); /* the launcher is already gone */
    setpgid(0, 0);
    launcher_child_dup(devnull, 0);
    launcher_child_dup(out_w, 1);
    launcher_child_dup(err_w, 2);
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
    int out[2] = {-1, -1}, err[2] = {-1, -1};
    if (pipe2(out, O_CLOEXEC) < 0 || pipe2(err, O_CLOEXEC) < 0) {
        int e = errno;
        for (int i = 0; i < 2; i++) {
            if (out[i] >= 0)
                close(out[i]);
            if (err[i] >= 0)
                close(err[i]);
        }
        return error_set("launcher: cannot create pipes for rank %d: %s", r, strerror(e));
    }
    sigset_t block;
    sigemptyset(&block);
    for (int i = 0; i < LAUNCHER_NSIGNALS; i++)
        sigaddset(&block, launcher_signals[i]);
    sigprocmask(SIG_BLOCK, &block, NULL); /* no handler of ours may run in the child */
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid == 0)
        launcher_child(o, w->env, parent, devnull, out[1], err[1], old_actions, run_mask);
    int fork_errno = errno;
    sigprocmask(SIG_SETMASK, run_mask, NULL);
    close(out[1]);
    close(err[1]);
    if (pid < 0) {
        close(out[0]);
        close(err[0]);
        return error_set("launcher: cannot fork rank %d: %s", r, strerror(fork_errno));
    }
    setpgid(pid, pid); /* also done by the child; whichever runs first wins, both agree */
    w->pid = pid;
    w->alive = 1;
    st->alive++;
    w->streams[0].fd = out[0];
    w->streams[0].out_fd = 1;
    w->streams[1].fd = err[0];
    w->streams[1].out_fd = 2;
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
            if (!st->signal_seen)
                st->signal_seen = launcher_first_signal;
            if (!st->stopping)
                launcher_begin_stop(st);
            else if (!st->killed)
                launcher_kill_all(st); /* asked again while stopping: no more grace */
        }
        if (!st->stopping && st->o->should_stop && clock_now_ms() >= next_ask) {
            next_ask = clock_now_ms() + LAUNCHER_HOOK_MS;
            if (st->o->should_stop(st->o->hook_ctx, st->why, sizeof st->why)) {
                st->asked_stop = 1;
                launcher_begin_stop(st);
            }
        }
        if (st->stopping && !st->killed && clock_now_ms() >= st->kill_at_ms)
            launcher_kill_all(st);
    }
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

    struct launcher_state st = {.n = o->nprocs,
                                .o = o,
                                .rank_base = o->rank_base,
                                .grace_ms =
                                    o->grace_ms > 0 ? o->grace_ms : LAUNCHER_DEFAULT_GRACE_MS,
                                .wake = {-1, -1},
                                .failed_rank = -1};
    int rc = -1, devnull = -1, installed = 0;
    struct sigaction old_actions[LAUNCHER_NSIGNALS];
    sigset_t old_mask;
    sigprocmask(SIG_SETMASK, NULL, &old_mask);
    struct pollfd *pfds = calloc(2 * (size_t)o->nprocs + 1, sizeof *pfds);
    st.w = calloc((size_t)o->nprocs, sizeof *st.w);
    st.scratch = malloc(LAUNCHER_LINE_MAX + 32);
    if (!pfds || !st.w || !st.scratch) {
        error_set("launcher: out of memory for %d workers", o->nprocs);
        goto out;
    }
    for (int r = 0; r < st.n; r++) {
        st.w[r].streams[0].fd = st.w[r].streams[1].fd = -1;
        if (!(st.w[r].env = launcher_env_build(o, addr, port, r))) {
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
        struct sigaction sa = {.sa_handler = launcher_on_signal,
                               .sa_flags = SA_RESTART |
                                           (launcher_signals[i] == SIGCHLD ? SA_NOCLDSTOP : 0)};
        sigemptyset(&sa.sa_mask);
        sigaction(launcher_signals[i], &sa, &old_actions[i]);
    }
    installed = 1;
    sigset_t run_mask = old_mask; /* a caller that blocks them would leave us deaf */
    for (int i = 0; i < LAUNCHER_NSIGNALS; i++)
        sigdelset(&run_mask, launcher_signals[i]);
    sigprocmask(SIG_SETMASK, &run_mask, NULL);
    fflush(NULL); /* our buffered output first, then the workers' */

    for (int r = 0; r < st.n; r++)
        if (launcher_start(&st, o, r, devnull, old_actions, &run_mask) < 0) {
            /* stop and reap the ones already running, then report the start failure */
            for (int q = 0; q < r; q++)
                launcher_signal_worker(&st.w[q], SIGKILL);
            for (int q = 0; q < r; q++)
                while (waitpid(st.w[q].pid, NULL, 0) < 0 && errno == EINTR)
                    ;
            for (int q = 0; q < r; q++)
                for (int k = 0; k < 2; k++)
                    if (st.w[q].streams[k].fd >= 0)
                        launcher_stream_close(&st, q, &st.w[q].streams[k]);
            goto out;
        }

    launcher_supervise(&st, pfds);
    launcher_drain(&st, pfds);

    char why[128];
    if (o->result) {
        memset(o->result, 0, sizeof *o->result);
        o->result->failed_rank = -1;
    }
    if (st.failed_rank >= 0) {
        launcher_describe_status(st.failed_status, why, sizeof why);
        int grank = st.rank_base + st.failed_rank;
        if (st.stopped_others)
            fprintf(stderr, "ddpprof: rank %d failed (%s); stopped the other %d rank(s)%s\n",
                    grank, why, st.stopped_others, o->nnodes > 1 ? " on this node" : "");
        else
            fprintf(stderr, "ddpprof: rank %d failed (%s)\n", grank, why);
        if (o->result) {
            o->result->failed_rank = grank;
            o->result->failed_status = st.failed_status;
            snprintf(o->result->cause, sizeof o->result->cause, "%s", why);
        }
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
        for (int r = 0; r < st.n; r++)
            launcher_env_free(st.w[r].env);
    free(st.w);
    free(st.scratch);
    free(pfds);
    return rc;
}
