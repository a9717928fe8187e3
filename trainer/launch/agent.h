/* agent.h — the node agent: what torchrun's elastic agent does for one node of a job.
 *
 * Every node runs `ddpprof train --nnodes N --node-rank R --master-addr A --master-port P`;
 * its agent meets the others in the agent store, a ddpprof store (comm/store.h) that node
 * 0's agent hosts on A:P.  For each attempt (the first run, then each restart):
 *
 *   agent_join     every node announces itself (its host name) and waits, up to the timeout,
 *                  for all N (naming the ones that did not come); node 0 publishes the port of
 *                  this attempt's worker store (worker rank 0 hosts it on node 0; a free port
 *                  per attempt, so nothing of a failed attempt lingers), its secret (fresh per
 *                  attempt, comm/store_auth.h), the job's run id and the checkpoint to resume
 *                  from
 *   (launcher)     the node's workers run; agent_on_failure and agent_should_stop are the
 *                  launcher's hooks: a local failure is published at once as the attempt's
 *                  cause ("node 1 (host b): rank 3 killed by signal 9: Killed"; the first node
 *                  to claim it wins), and every other node stops its workers within about
 *                  100 ms of seeing it, or of seeing a node lost (its agent's connection to the
 *                  store closed without goodbye: killed, or its host went down); a local
 *                  worker stopped (SIGSTOP) is published too, so that the node whose rank
 *                  timed out waiting for it can name it
 *   agent_finish   after the workers all exited 0: waits until every node's have (or one
 *                  failed)
 *   agent_archive  after a failure: this node's files of the attempt (its ranks' traces; the
 *                  meta.csv and metrics.csv it wrote; on node 0 the checkpoint) move into
 *                  OUT/attempt-K/, so the next attempt writes fresh ones beside them, and
 *                  the checkpoint moved there is what the next attempt resumes from.
 *
 * With one node there is no store: the same calls work on this node alone.  A node that was
 * lost cannot rejoin, so its loss ends the job on every node, restarts left or not. */
#ifndef DDPPROF_AGENT_H
#define DDPPROF_AGENT_H

#include <stddef.h>

struct launch_result;

struct agent_opts {
    int nnodes, node_rank;   /* this node of nnodes (>= 1) */
    int nproc;               /* ranks on every node: this node's are node_rank * nproc + i */
    const char *master_addr; /* node 0's address (nnodes > 1), also the workers' MASTER_ADDR */
    int master_port;         /* nnodes > 1: the agent store's port; 1 node: the workers' store
                                port (0: a free one per attempt) */
    int timeout_ms;          /* joining and every store call */
    const char *out_dir;     /* this node's run directory */
    const char *resume;      /* the checkpoint the first attempt resumes from (--resume), or
                                NULL */
};

/* One attempt, as node 0 published it. */
struct agent_attempt {
    int attempt;         /* 0, then 1 for the first restart, ... */
    int worker_port;     /* MASTER_PORT of this attempt's workers */
    char secret[65];     /* DDPPROF_JOB_SECRET of this attempt's workers (hex) */
    char run_id[128];    /* the job's id (TORCHELASTIC_RUN_ID) */
    char resume[4096];   /* checkpoint to resume from ("" : none) */
    char causes[2048];   /* why each earlier attempt failed, one line each ("" at first) */
};

struct agent;

/* Connect to (node 0: host) the agent store; with one node, just remember o.  Strings in o
 * are copied.  NULL + error_set naming the node and the address on failure. */
struct agent *agent_create(const struct agent_opts *o);

/* Rendezvous of every node for attempt `attempt` (0, 1, ... in order), filling out.  0, or
 * -1 (error_set naming the missing nodes, or the node that was lost). */
int agent_join(struct agent *a, int attempt, struct agent_attempt *out);

/* launch_opts hooks (ctx is the agent).  A failure's cause names the culprit when one is
 * known: "rank 3 (node 1, host b) did not arrive in all-reduce #12 (stopped by SIGSTOP);
 * rank 0 (node 0, host a) failed waiting for it (exit status 1)" -- the launcher's culprit,
 * or, when it knows none, a rank another node's agent published as stopped (then also
 * filled into the failure, for the launcher's own line). */
void agent_on_failure(void *ctx, struct launch_result *failure);
void agent_on_stop_state(void *ctx, int rank, int stop_sig);
int agent_should_stop(void *ctx, char *why, size_t cap);

/* This node's workers all exited 0: wait (up to the timeout) for the other nodes'.  0 when
 * every node finished, -1 (error_set with the cause) when one failed or was lost. */
int agent_finish(struct agent *a);

/* The failed attempt's cause in words into cause ("node 1 (host b): rank 3 killed by signal
 * 9: Killed"), from res (this node's launch) and the store.  Returns 1 when the job may be
 * restarted (no node was lost), else 0. */
int agent_cause(struct agent *a, const struct launch_result *res, char *cause, size_t cap);

/* Move this node's files of attempt `attempt` into out_dir/attempt-<attempt>/ (see above).
 * 0 or -1 (error_set). */
int agent_archive(struct agent *a, int attempt);

/* Leave the store (node 0: once the other nodes have left, up to the timeout). */
void agent_destroy(struct agent *a);

#endif
