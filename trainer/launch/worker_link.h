/* worker_link.h — what a worker tells its launcher, besides its output.
 *
 * ddpprof's launcher (launcher.h) gives every worker one end of a socket pair
 * (SOCK_SEQPACKET: one message per send, never split or merged) and names its descriptor in
 * DDPPROF_LAUNCHER_FD.  On it the worker says, one short text message each:
 *
 *   "joining"                          its rendezvous begins (the store, then the comm)
 *   "ready"                            its rendezvous is over: the collectives are set up
 *   "progress E N DONE TOTAL LOSS"     rank 0, every few steps: epoch E of N, DONE of TOTAL
 *                                      images of the job in this epoch, the last step's loss
 *   "failed MESSAGE"                   the one-line error it is about to exit with
 *
 * so that the launcher can bound the whole rendezvous by --timeout, draw one progress bar
 * for the job, and name in its summary the rank a failed collective waited for
 * (worker_link_blame reads the collective and the missing ranks out of the comm's error).
 *
 * A worker started by another launcher (torchrun, mpirun, Slurm) has no link: every call is
 * then a no-op.  Sends never block and never raise SIGPIPE: a message the launcher cannot
 * take at once (it is gone, or its socket buffer is full) is dropped. */
#ifndef DDPPROF_WORKER_LINK_H
#define DDPPROF_WORKER_LINK_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define WORKER_LINK_ENV "DDPPROF_LAUNCHER_FD"
#define WORKER_LINK_MSG_MAX 2048 /* bytes of one message, longer ones are cut */

/* ---------------------------------------------------------------- the worker's side */

/* Take the link named by DDPPROF_LAUNCHER_FD, if any: the descriptor is made close-on-exec
 * and the variable removed from the environment (nothing this process starts inherits
 * either).  Idempotent; a variable that names no socket is ignored. */
void worker_link_open(void);

/* Send one message (printf format, see above).  No-op without a link. */
void worker_link_say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* ---------------------------------------------------------------- the launcher's side */

enum worker_msg_kind {
    WORKER_MSG_UNKNOWN,
    WORKER_MSG_JOINING,
    WORKER_MSG_READY,
    WORKER_MSG_PROGRESS,
    WORKER_MSG_FAILED,
};

/* Where rank 0 is in training (a "progress" message). */
struct worker_progress {
    int epoch, epochs;       /* 1-based epoch of epochs */
    long long done, total;   /* images of the job done in this epoch, of total */
    double loss;             /* the last step's loss */
};

struct worker_msg {
    enum worker_msg_kind kind;
    struct worker_progress progress; /* WORKER_MSG_PROGRESS */
    const char *text;                /* WORKER_MSG_FAILED: the error, pointing into msg */
};

/* Read one message of len bytes at msg (which must hold len + 1 bytes: it is ended with a
 * '\0' in place).  Returns out->kind; a message that does not parse is WORKER_MSG_UNKNOWN. */
enum worker_msg_kind worker_link_parse(char *msg, size_t len, struct worker_msg *out);

#define WORKER_BLAME_MAX 16

/* Who a failed collective waited for, as the comm's one-line error says it. */
struct worker_blame {
    char collective[96];        /* "all-gather #1607", "" when the error names none */
    int ranks[WORKER_BLAME_MAX]; /* the ranks it names as missing: "rank 1 did not arrive",
                                    "ranks 2, 3 did not arrive", "rank 1 (pid 7) died",
                                    "the peer is rank 3", "the peer is one of ranks 2, 3",
                                    "rank 0 gave up on the communicator first", "lost the
                                    connection to rank 0's store" */
    int nranks;
    int gone; /* 1: the ranks named died or gave up first ("died", "gave up", "lost the
                 connection"); 0: they did not come (a hang, or a peer gloo names) */
};

/* Fill b from message (a comm error, possibly wrapped in context).  Returns 1 when it named
 * a collective or a rank, else 0 (b then empty). */
int worker_link_blame(const char *message, struct worker_blame *b);

#ifdef __cplusplus
}
#endif
#endif
