/* launcher.h — start this node's workers with torchrun's environment and babysit them.
 *
 * What `ddpprof train --cpu N --mode ddp` uses: fork one child per local rank with
 * torchrun's variables (MASTER_ADDR, MASTER_PORT, WORLD_SIZE, RANK, LOCAL_RANK,
 * LOCAL_WORLD_SIZE, GROUP_RANK, GROUP_WORLD_SIZE, ROLE_RANK, ROLE_WORLD_SIZE,
 * TORCHELASTIC_RESTART_COUNT, TORCHELASTIC_MAX_RESTARTS, TORCHELASTIC_RUN_ID, and
 * TORCHELASTIC_USE_AGENT_STORE=False: MASTER_PORT is worker rank 0's store) and the job's
 * secret for that store (DDPPROF_JOB_SECRET, comm/store_auth.h), prefix each
 * line the workers print with "[rank N] ", and if any worker fails stop all the others
 * (SIGTERM, then SIGKILL after a grace), so that a run never hangs and never leaves orphans.
 * On several nodes the node agent (agent.h) hooks in: it hears of a local failure at once
 * and can stop the workers when another node failed. */
#ifndef DDPPROF_LAUNCHER_H
#define DDPPROF_LAUNCHER_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define LAUNCHER_DEFAULT_GRACE_MS 3000

struct worker_progress;

/* How one launch ended (launch_opts.result), or, for on_failure, how it is failing. */
struct launch_result {
    int failed_rank;   /* global rank of the first worker that failed, or -1 */
    int failed_status; /* its wait status (0 when it failed the rendezvous deadline) */
    char cause[160];   /* its fate in words: "exit status 3", "killed by signal 9: Killed",
                          "did not join the rendezvous within 3.0 s (--timeout)" */
    int culprit_rank;  /* the rank it waited for, or -1: a rank its collective's error names
                          as missing ("rank 1 did not arrive"), else a worker of this node
                          that was stopped (SIGSTOP) when it failed */
    int culprit_stop_sig; /* the signal that stopped the culprit (local workers), or 0 */
    char collective[96];  /* the collective it failed in ("all-gather #1607"), or "" */
    int stopped;       /* 1: should_stop ended the run (another node failed) */
    char why[512];     /* should_stop's reason */
};

struct launch_opts {
    int nprocs;              /* workers to start (>= 1), local ranks 0..nprocs-1 */
    const char *master_addr; /* MASTER_ADDR for the workers; NULL =
                                DIST_ENV_DEFAULT_ADDR (this machine) */
    int master_port;         /* MASTER_PORT; 0 = a free port (launcher_free_port) */
    char *const *argv;       /* worker command line, NULL-terminated; argv[0] is a path that
                                is exec'd as is (no PATH search), e.g. /proc/self/exe resolved */
    char *const *env;        /* extra "NAME=value" for every worker, NULL-terminated, or NULL;
                                torchrun's variables (above) always win */
    int grace_ms;            /* SIGTERM -> SIGKILL grace when stopping; <= 0: 3000 */
    int rendezvous_ms;       /* > 0: every worker must say "joining" (worker_link.h) within
                                this long of the first one, and "ready" within this long of
                                the last one joining, or the run fails naming the late ranks;
                                0: no bound (workers that do not speak the link) */
    int progress;            /* 1: draw the job's progress bar (rank 0's "progress"
                                messages) on our stderr when it is a terminal */
    const char *flight_dir;  /* the run directory, where a failed collective leaves
                                rank<N>.flight.csv (comm/flight.h); NULL: none.  A failure
                                then gets a second line saying where each rank was */

    /* the job beyond this node (all 0: one node, ranks 0..nprocs-1) */
    int rank_base;           /* RANK of local rank 0 (node_rank * nprocs) */
    int world;               /* WORLD_SIZE; 0: nprocs */
    int node_rank, nnodes;   /* GROUP_RANK, GROUP_WORLD_SIZE; nnodes 0: 1 */
    int restart_count, max_restarts; /* TORCHELASTIC_RESTART_COUNT, _MAX_RESTARTS */
    const char *run_id;      /* TORCHELASTIC_RUN_ID; NULL: "none" */
    const char *secret;      /* DDPPROF_JOB_SECRET for the workers' store, the same on every
                                node (the agent's); NULL: a fresh random one (one node).
                                Given in their environment only (not their command line,
                                which every user of the host may read), in place of any
                                DDPPROF_JOB_SECRET or DDPPROF_JOB_SECRET_FILE of ours */

    /* the node agent's hooks, called on the calling thread; any may be NULL */
    void (*on_failure)(void *ctx, struct launch_result *failure); /* a local worker failed
                                (failed_rank, failed_status, cause, and what this node knows
                                of the culprit), before the others are stopped; it may fill
                                in a culprit it knows of (on another node) */
    void (*on_stop_state)(void *ctx, int rank, int stop_sig); /* a local worker (global
                                rank) was stopped by stop_sig (SIGSTOP, SIGTSTP, ...), or
                                continued (stop_sig 0) */
    int (*should_stop)(void *ctx, char *why, size_t cap); /* polled about every 100 ms while
                                workers run: 1 (with why filled) stops them all */
    void *hook_ctx;
    struct launch_result *result; /* filled when not NULL */
};

/* Run the workers to completion.  Each worker's stdin is /dev/null; its stdout and stderr
 * lines go to our stdout and stderr as "[rank N] line" (N the global rank; a last line
 * without newline is ended at exit; a line longer than 64 KiB is split).  Each worker also
 * gets a link (worker_link.h) on which it may say what it is doing.  Each worker is the
 * leader of its own process group (signals go to the group, so what a worker forked goes
 * too; anything still holding a worker's output pipes 200 ms after it exited is
 * SIGKILLed), and gets SIGKILL if the calling thread dies (PR_SET_PDEATHSIG), so call this
 * from the main thread.  Workers are started one by one; one that exits meanwhile is reaped
 * at once, and a failure or a signal stops the starting.  Worker argv and env strings are
 * only read; nothing is retained after return.
 *
 * Returns 0 when every worker exited 0.  When one exits non-zero or dies by a signal,
 * the others get SIGTERM (their process groups, followed by SIGCONT so that a stopped one
 * acts on it), SIGKILL after grace_ms, all are reaped, one line goes to stderr and it
 * returns 1.  The line names the culprit where one is known: "ddpprof: rank 1 did not
 * arrive in all-gather #1607 (stopped by SIGSTOP); rank 0 failed waiting for it (exit
 * status 1); stopped the other 1 rank(s)" (see launch_result.culprit_rank), else the rank
 * that failed: "ddpprof: rank 1 failed (exit status 3); stopped the other 2 rank(s)".  With
 * flight_dir, where the workers' flight recorders were dumped a second line follows:
 * "ddpprof: flight recorder: rank 0 is in all-reduce #1127 (failed), rank 1 in reduce #1127
 * (failed) (rankN.flight.csv in DIR)".  The
 * rank that failed is the first, except that one killed by a signal within 200 ms of an
 * error exit (or later, while it is visibly dying) is named instead (the error most likely
 * came from losing it).  With rendezvous_ms, a worker late for the rendezvous fails the
 * same way ("ddpprof: rank 3 did not join the rendezvous within 3.0 s (--timeout) of the
 * first rank; stopped ...").  When should_stop says so, every worker is stopped the same
 * way, "ddpprof: <why>; stopped the N rank(s) on this node" goes to stderr and it returns
 * 1.  SIGINT or SIGTERM to this process (also while workers are being started) forwards
 * SIGTERM to every worker the same way, prints "ddpprof: interrupted by SIGINT; stopped 2
 * rank(s)" and returns 130 or 143; a second signal while stopping (0.5 s or more after the
 * first: sooner it is the same request delivered twice) skips the grace.  -1
 * with error_set when the workers could not be started (bad options, no free port, too few
 * file descriptors, fork/pipe failure; any already started are stopped and reaped).
 * Handlers for SIGINT, SIGTERM and SIGCHLD are installed during the call and restored
 * after it; not reentrant (one call at a time per process). */
int launcher_run(const struct launch_opts *o);

/* Before anything starts: can this machine hold nprocs CPU ranks?  More ranks than the
 * cores this process may run on (its affinity mask) only thrash, every rank computing flat
 * out, so it is refused unless oversubscribe.  what names the request in the message
 * ("--cpu 1000").  0, or -1 with error_set (one line saying the cores and the way out). */
int launcher_check_fit(int nprocs, int oversubscribe, const char *what);

/* The job's progress bar as one line without newline: "  epoch 1/3 [#####     ]  52%
 * 31200/60000 images, loss 0.6100". */
void launcher_format_bar(char *buf, size_t cap, const struct worker_progress *p);

/* Draw that bar on fd (a terminal) over its current line; an epoch's last step (done at
 * total) ends the line.  The launcher's own bar, and a rank's where no launcher draws it
 * (`ddpprof train` on a terminal, a worker of torchrun's). */
void launcher_draw_bar(int fd, const struct worker_progress *p);

/* "SIGSTOP", "SIGTSTP", "SIGTTIN" or "SIGTTOU" for the signals that stop a process, else
 * "signal N" written into buf. */
const char *launcher_stop_name(int sig, char *buf, size_t cap);

/* A TCP port that is free right now on this host (bind port 0 on 0.0.0.0 and ask), or -1
 * with error_set.  Another process may take it before it is used. */
int launcher_free_port(void);

#ifdef __cplusplus
}
#endif
#endif
