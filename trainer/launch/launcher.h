/* launcher.h — start N local workers with torchrun's environment and babysit them.
 *
 * What `ddpprof train --cpu N --mode ddp` uses: fork one child per rank with MASTER_ADDR,
 * MASTER_PORT, WORLD_SIZE, RANK, LOCAL_RANK and LOCAL_WORLD_SIZE set, prefix each line
 * the workers print with "[rank N] ", and if any worker fails stop all the others (SIGTERM,
 * then SIGKILL after a grace), so that a run never hangs and never leaves orphans. */
#ifndef DDPPROF_LAUNCHER_H
#define DDPPROF_LAUNCHER_H

#ifdef __cplusplus
extern "C" {
#endif

#define LAUNCHER_DEFAULT_GRACE_MS 3000

struct launch_opts {
    int nprocs;              /* workers to start (>= 1), ranks 0..nprocs-1, all local */
    const char *master_addr; /* MASTER_ADDR for the workers; NULL =
                                DIST_ENV_DEFAULT_ADDR (this machine) */
    int master_port;         /* MASTER_PORT; 0 = a free port (launcher_free_port) */
    char *const *argv;       /* worker command line, NULL-terminated; argv[0] is a path that
                                is exec'd as is (no PATH search), e.g. /proc/self/exe resolved */
    char *const *env;        /* extra "NAME=value" for every worker, NULL-terminated, or NULL;
                                the six variables above always win */
    int grace_ms;            /* SIGTERM -> SIGKILL grace when stopping; <= 0: 3000 */
};

/* Run the workers to completion.  Each worker's stdin is /dev/null; its stdout and stderr
 * lines go to our stdout and stderr as "[rank N] line" (a last line without newline is
 * ended at exit; a line longer than 64 KiB is split).  Each worker is the leader of its
 * own process group (signals go to the group, so what a worker forked goes too; anything
 * still holding a worker's output pipes 200 ms after it exited is SIGKILLed), and gets
 * SIGKILL if the calling thread dies (PR_SET_PDEATHSIG), so call this from the main
 * thread.  Worker argv and env strings are only read; nothing is retained after return.
 *
 * Returns 0 when every worker exited 0.  When one exits non-zero or dies by a signal,
 * the others get SIGTERM (their process groups), SIGKILL after grace_ms, all are reaped,
 * one line like "ddpprof: rank 1 failed (exit status 3); stopped the other 2 rank(s)" goes
 * to stderr and it returns 1.  SIGINT or SIGTERM to this process forwards SIGTERM to every
 * worker the same way, prints "ddpprof: interrupted by SIGINT; stopped 2 rank(s)" and
 * returns 130 or 143; a second signal while stopping skips the grace.  -1 with error_set when the workers could
 * not be started (bad options, no free port, fork/pipe failure; any already started are
 * stopped and reaped).  Handlers for SIGINT, SIGTERM and SIGCHLD are installed during the
 * call and restored after it; not reentrant (one call at a time per process). */
int launcher_run(const struct launch_opts *o);

/* A TCP port that is free right now on this host (bind port 0 on 0.0.0.0 and ask), or -1
 * with error_set.  Another process may take it before it is used. */
int launcher_free_port(void);

#ifdef __cplusplus
}
#endif
#endif
