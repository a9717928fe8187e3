/* agent.c — the node agent (see agent.h).
 *
 * Keys of the agent store, per attempt K:
 *   run_id               the job's id (node 0, once)
 *   aK/node/R            node R's host name: it joined attempt K
 *   aK/port              this attempt's worker store port (node 0)
 *   aK/secret            this attempt's worker store secret (node 0)
 *   aK/resume            the checkpoint this attempt resumes from, "" for none (node 0)
 *   aK/causes            why the earlier attempts failed, one line each (node 0)
 *   aK/claims, aK/cause  a counter and the first failure's words: whoever counts 1 writes it
 *   aK/done/R            node R's workers all exited 0
 *   aK/stopped/G         rank G is stopped: the signal's number ("19"), "" once it runs again
 * and the store's own departure marks (store_lost): a node whose agent vanished. */
#include "launch/agent.h"

#include "comm/store.h"
#include "comm/store_auth.h"
#include "common/clock.h"
#include "common/error.h"
#include "launch/launcher.h"
#include "probes/run_format.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define AGENT_POLL_MS 50        /* how often a wait for the other nodes looks again */
#define AGENT_VICTIM_WAIT_MS 500 /* a rank that exited non-zero may have lost a peer */

struct agent {
    int nnodes, node_rank, nproc, master_port, timeout_ms;
    char master_addr[256], out_dir[4096];
    struct store *store; /* NULL on one node */
    char host[256];
    int attempt;
    char run_id[128];
    char latest[4096]; /* the latest checkpoint known to node 0 ("": none) */
    char causes[2048]; /* the failed attempts' causes, one line each */
    char local_cause[512]; /* one node: this attempt's failure */
    int lost;          /* a node was lost: no restart can bring it back */
    int gone;          /* the agent store failed us (node 0 lost): it is not asked again */
    char gone_why[360]; /* what that failure said, as a cause */
};

/* A store call failed: node 0's rendezvous is gone (its agent was killed, its host is down,
 * or the network between us is).  Remembered, so that no later call waits out the timeout
 * again, and said as the attempt's cause.  Returns -1. */
static int agent_store_failed(struct agent *a)
{
    if (!a->gone) {
        a->gone = a->lost = 1;
        snprintf(a->gone_why, sizeof a->gone_why,
                 "lost node 0's rendezvous at %.48s:%d (node 0's agent was killed, or its host "
                 "or the network to it is down: %.160s)",
                 a->master_addr, a->master_port, error_get());
    }
    return error_set("%s", a->gone_why);
}

/* store_check, store_lost and store_add on the agent store, each once the store is gone
 * failing at once (agent_store_failed) */
static int agent_check(struct agent *a, const char *key, int *exists)
{
    *exists = 0;
    if (a->gone || store_check(a->store, key, exists))
        return agent_store_failed(a);
    return 0;
}

static int agent_lost(struct agent *a, int *first)
{
    *first = -1;
    int r = a->gone ? -1 : store_lost(a->store, a->node_rank, first);
    return r < 0 ? agent_store_failed(a) : r;
}

/* "aK/name" of the current attempt */
static void agent_key(const struct agent *a, char *key, size_t cap, const char *name)
{
    snprintf(key, cap, "a%d/%s", a->attempt, name);
}

/* The store value of key as a string (waits for it, up to the timeout). */
static int agent_get(struct agent *a, const char *key, char *out, size_t cap)
{
    size_t len = 0;
    out[0] = '\0';
    if (a->gone || store_get(a->store, key, out, cap - 1, &len))
        return agent_store_failed(a);
    out[len < cap ? len : cap - 1] = '\0';
    return 0;
}

static int agent_set(struct agent *a, const char *key, const char *val)
{
    if (a->gone || store_set(a->store, key, val, strlen(val)))
        return agent_store_failed(a);
    return 0;
}

/* The host name node r announced (for messages); "?" when unknown. */
static void agent_node_host(struct agent *a, int r, char *out, size_t cap)
{
    char key[64];
    int exists = 0;
    snprintf(out, cap, "?");
    for (int k = a->attempt; k >= 0 && !a->gone; k--) {
        snprintf(key, sizeof key, "a%d/node/%d", k, r);
        if (agent_check(a, key, &exists) == 0 && exists) {
            agent_get(a, key, out, cap);
            return;
        }
    }
}

/* The lost-node message of node r. */
static void agent_lost_words(struct agent *a, int r, char *out, size_t cap)
{
    char host[256];
    agent_node_host(a, r, host, sizeof host);
    snprintf(out, cap,
             "node %d (host %s) was lost: its agent's connection to the rendezvous closed "
             "(killed, or its host is down)",
             r, host);
}

struct agent *agent_create(const struct agent_opts *o)
{
    if (o->nnodes < 1 || o->node_rank < 0 || o->node_rank >= o->nnodes || o->nproc < 1) {
        error_set("agent: node %d of %d with %d rank(s) each is impossible", o->node_rank,
                  o->nnodes, o->nproc);
        return NULL;
    }
    struct agent *a = calloc(1, sizeof *a);
    if (!a) {
        error_set("agent: out of memory");
        return NULL;
    }
    a->nnodes = o->nnodes;
    a->node_rank = o->node_rank;
    a->nproc = o->nproc;
    a->master_port = o->master_port;
    a->timeout_ms = o->timeout_ms;
    snprintf(a->master_addr, sizeof a->master_addr, "%s",
             o->master_addr && *o->master_addr ? o->master_addr : "127.0.0.1");
    snprintf(a->out_dir, sizeof a->out_dir, "%s", o->out_dir ? o->out_dir : ".");
    snprintf(a->latest, sizeof a->latest, "%s", o->resume ? o->resume : "");
    gethostname(a->host, sizeof a->host - 1);
    snprintf(a->run_id, sizeof a->run_id, "%.64s-%d-%lld", a->host, (int)getpid(),
             (long long)time(NULL));
    if (a->nnodes == 1)
        return a;
    a->store = store_create(a->master_addr, a->master_port, a->node_rank == 0, a->node_rank,
                            a->nnodes, a->timeout_ms);
    if (!a->store) {
        if (a->node_rank == 0)
            error_wrap("node 0 cannot host the rendezvous on port %d", a->master_port);
        else
            error_wrap("node %d cannot reach node 0's rendezvous at %s:%d", a->node_rank,
                       a->master_addr, a->master_port);
        free(a);
        return NULL;
    }
    if (a->node_rank == 0 && agent_set(a, "run_id", a->run_id)) {
        agent_destroy(a);
        return NULL;
    }
    return a;
}

/* Wait until every node has the key aK/<name>/<node>; on timeout, error naming the nodes
 * that have not (what: "joined attempt 0", "finished").  A lost node or a published cause ends the
 * wait at once (cause_ends: the cause is the error). */
static int agent_wait_nodes(struct agent *a, const char *name, const char *what, int cause_ends)
{
    char *seen = calloc((size_t)a->nnodes, 1);
    if (!seen)
        return error_set("agent: out of memory");
    int64_t deadline = clock_now_ms() + a->timeout_ms;
    int rc = 0;
    for (;;) {
        int missing = 0;
        for (int r = 0; r < a->nnodes && rc == 0; r++) {
            char key[128], sub[64];
            int exists = 0;
            if (seen[r])
                continue;
            snprintf(sub, sizeof sub, "%s/%d", name, r);
            agent_key(a, key, sizeof key, sub);
            if (agent_check(a, key, &exists))
                rc = error_wrap("node %d", a->node_rank);
            seen[r] = (char)exists;
            missing += !exists;
        }
        if (rc || !missing)
            break;
        int first = -1, exists = 0;
        char key[64], text[512];
        if (agent_lost(a, &first) < 0) {
            rc = -1;
            break;
        }
        if (first >= 0 && first != a->node_rank) {
            a->lost = 1;
            agent_lost_words(a, first, text, sizeof text);
            rc = error_set("%s", text);
            break;
        }
        agent_key(a, key, sizeof key, "cause");
        if (cause_ends && agent_check(a, key, &exists) == 0 && exists &&
            agent_get(a, key, text, sizeof text) == 0) {
            rc = error_set("%s", text);
            break;
        }
        if (clock_now_ms() >= deadline) {
            char list[512] = "";
            size_t at = 0;
            int n = 0;
            for (int r = 0; r < a->nnodes && at < sizeof list - 16; r++)
                if (!seen[r])
                    at += (size_t)snprintf(list + at, sizeof list - at, "%s%d", n++ ? ", " : "",
                                           r);
            rc = error_set("rendezvous at %s:%d: node%s %s %s %s within %.1f s (node %d of %d "
                           "here; start `ddpprof train` on every node with the same --nnodes, "
                           "--master-addr and --master-port, and its own --node-rank)",
                           a->master_addr, a->master_port, n == 1 ? "" : "s", list,
                           n == 1 ? "has not" : "have not", what, a->timeout_ms / 1000.0,
                           a->node_rank, a->nnodes);
            break;
        }
        clock_sleep_ms(AGENT_POLL_MS);
    }
    free(seen);
    return rc;
}

int agent_join(struct agent *a, int attempt, struct agent_attempt *out)
{
    memset(out, 0, sizeof *out);
    a->attempt = out->attempt = attempt;
    a->local_cause[0] = '\0';
    if (a->nnodes == 1) {
        out->worker_port = a->master_port ? a->master_port : launcher_free_port();
        if (out->worker_port < 0 || store_auth_new_secret(out->secret))
            return -1;
        snprintf(out->run_id, sizeof out->run_id, "%s", a->run_id);
        snprintf(out->resume, sizeof out->resume, "%s", a->latest);
        snprintf(out->causes, sizeof out->causes, "%s", a->causes);
        return 0;
    }
    char key[64], val[4096], what[64];
    snprintf(key, sizeof key, "a%d/node/%d", attempt, a->node_rank);
    if (agent_set(a, key, a->host))
        return error_wrap("node %d: joining attempt %d", a->node_rank, attempt);
    if (a->node_rank == 0) {
        int port = launcher_free_port();
        if (port < 0)
            return -1;
        snprintf(val, sizeof val, "%d", port);
        agent_key(a, key, sizeof key, "port");
        if (agent_set(a, key, val))
            return -1;
        agent_key(a, key, sizeof key, "resume");
        if (agent_set(a, key, a->latest))
            return -1;
        agent_key(a, key, sizeof key, "causes");
        if (agent_set(a, key, a->causes))
            return -1;
        /* the workers' secret, for every node's (the agents proved theirs to get it) */
        agent_key(a, key, sizeof key, "secret");
        if (store_auth_new_secret(out->secret) || agent_set(a, key, out->secret))
            return -1;
    }
    snprintf(what, sizeof what, "joined attempt %d", attempt);
    if (agent_wait_nodes(a, "node", what, 0))
        return -1;
    agent_key(a, key, sizeof key, "port");
    if (agent_get(a, key, val, sizeof val))
        return -1;
    out->worker_port = atoi(val);
    agent_key(a, key, sizeof key, "secret");
    if (agent_get(a, key, out->secret, sizeof out->secret))
        return -1;
    agent_key(a, key, sizeof key, "resume");
    if (agent_get(a, key, out->resume, sizeof out->resume))
        return -1;
    agent_key(a, key, sizeof key, "causes");
    if (agent_get(a, key, out->causes, sizeof out->causes) ||
        agent_get(a, "run_id", out->run_id, sizeof out->run_id))
        return -1;
    snprintf(a->run_id, sizeof a->run_id, "%s", out->run_id);
    snprintf(a->causes, sizeof a->causes, "%s", out->causes);
    return 0;
}

/* Whether another node already said why (a cause, or a lost node), or node 0's rendezvous
 * is gone (which says it). */
static int agent_someone_said(struct agent *a)
{
    char key[64];
    int exists = 0, first = -1;
    agent_key(a, key, sizeof key, "cause");
    if (agent_check(a, key, &exists) || exists)
        return 1;
    return agent_lost(a, &first) < 0 || first >= 0;
}

void agent_on_stop_state(void *ctx, int rank, int stop_sig)
{
    struct agent *a = ctx;
    if (!a->store || a->gone)
        return;
    char key[64], sub[32], val[16] = "";
    snprintf(sub, sizeof sub, "stopped/%d", rank);
    agent_key(a, key, sizeof key, sub);
    if (stop_sig)
        snprintf(val, sizeof val, "%d", stop_sig);
    agent_set(a, key, val);
}

/* The signal that stopped rank g, as its node's agent published it; 0 if none. */
static int agent_stopped(struct agent *a, int g)
{
    char key[64], sub[32], val[16];
    int exists = 0;
    snprintf(sub, sizeof sub, "stopped/%d", g);
    agent_key(a, key, sizeof key, sub);
    if (agent_check(a, key, &exists) || !exists || agent_get(a, key, val, sizeof val))
        return 0;
    return atoi(val);
}

/* "rank 3 (node 1, host b)" */
static void agent_rank_words(struct agent *a, int g, char *out, size_t cap)
{
    int node = g / a->nproc;
    char host[256];
    if (node == a->node_rank || !a->store)
        snprintf(host, sizeof host, "%s", a->host);
    else
        agent_node_host(a, node, host, sizeof host);
    snprintf(out, cap, "rank %d (node %d, host %.48s)", g, node, host);
}

/* The cause of a local failure in words (see agent.h), into a->local_cause; a culprit on
 * another node that the launcher could not know of is filled into f. */
static void agent_describe_failure(struct agent *a, struct launch_result *f)
{
    int local = f->culprit_rank >= a->node_rank * a->nproc &&
                f->culprit_rank < (a->node_rank + 1) * a->nproc;
    char key[64];
    int exists = 0;
    agent_key(a, key, sizeof key, "cause");
    if (a->store && !local && agent_check(a, key, &exists) < 0) {
        /* node 0 is gone with its rendezvous: that is the cause, and a rank of another
         * node that "did not arrive" was only lost with it */
        snprintf(a->local_cause, sizeof a->local_cause, "%.360s; rank %d (node %d, host %.32s) "
                 "failed after it (%.40s)",
                 a->gone_why, f->failed_rank, a->node_rank, a->host, f->cause);
        f->culprit_rank = -1;
        f->culprit_stop_sig = 0;
        f->collective[0] = '\0';
        return;
    }
    if (a->store && f->culprit_rank >= 0 && !local)
        f->culprit_stop_sig = agent_stopped(a, f->culprit_rank);
    for (int g = 0; a->store && f->culprit_rank < 0 && g < a->nnodes * a->nproc; g++) {
        if (g / a->nproc == a->node_rank || g == f->failed_rank)
            continue; /* the launcher saw this node's own */
        if ((f->culprit_stop_sig = agent_stopped(a, g)) != 0)
            f->culprit_rank = g;
    }
    if (f->culprit_rank < 0) {
        snprintf(a->local_cause, sizeof a->local_cause, "node %d (host %s): rank %d failed (%s)",
                 a->node_rank, a->host, f->failed_rank, f->cause);
        return;
    }
    char who[96], failed[96], buf[32];
    agent_rank_words(a, f->culprit_rank, who, sizeof who);
    agent_rank_words(a, f->failed_rank, failed, sizeof failed);
    const char *sig =
        f->culprit_stop_sig ? launcher_stop_name(f->culprit_stop_sig, buf, sizeof buf) : NULL;
    snprintf(a->local_cause, sizeof a->local_cause,
             "%s did not arrive%s%.96s%s%.32s%s; %s failed waiting for it (%.100s)", who,
             f->collective[0] ? " in " : "", f->collective, sig ? " (stopped by " : "",
             sig ? sig : "", sig ? ")" : "", failed, f->cause);
}

void agent_on_failure(void *ctx, struct launch_result *f)
{
    struct agent *a = ctx;
    agent_describe_failure(a, f);
    if (!a->store)
        return;
    /* A rank that exited with an error (rather than being killed) may only have lost a
     * peer on another node: give that node's own claim, or the store's notice of its loss,
     * a moment to arrive first, so the cause names the node that failed. */
    if (!WIFSIGNALED(f->failed_status)) {
        int64_t until = clock_now_ms() + AGENT_VICTIM_WAIT_MS;
        while (clock_now_ms() < until) {
            if (agent_someone_said(a))
                return;
            clock_sleep_ms(20);
        }
    }
    char key[64];
    int64_t n = 0;
    agent_key(a, key, sizeof key, "claims");
    if (!a->gone && store_add(a->store, key, 1, &n) == 0 && n == 1) {
        agent_key(a, key, sizeof key, "cause");
        agent_set(a, key, a->local_cause);
    }
}

int agent_should_stop(void *ctx, char *why, size_t cap)
{
    struct agent *a = ctx;
    if (!a->store)
        return 0;
    char key[64], text[512];
    int exists = 0, first = -1;
    agent_key(a, key, sizeof key, "cause");
    if (agent_check(a, key, &exists) || (exists && agent_get(a, key, text, sizeof text))) {
        snprintf(why, cap, "%s", a->gone_why);
        return 1;
    }
    if (exists) {
        snprintf(why, cap, "%s", text);
        return 1;
    }
    if (agent_lost(a, &first) == 0 && first >= 0 && first != a->node_rank) {
        agent_lost_words(a, first, why, cap);
        a->lost = 1;
        return 1;
    }
    if (a->gone) {
        snprintf(why, cap, "%s", a->gone_why);
        return 1;
    }
    return 0;
}

int agent_finish(struct agent *a)
{
    if (!a->store)
        return 0;
    char key[64];
    snprintf(key, sizeof key, "a%d/done/%d", a->attempt, a->node_rank);
    if (agent_set(a, key, ""))
        return -1;
    return agent_wait_nodes(a, "done", "finished", 1);
}

int agent_cause(struct agent *a, const struct launch_result *res, char *cause, size_t cap)
{
    char key[64], text[512] = "";
    int exists = 0, first = -1;
    if (res && res->stopped)
        snprintf(text, sizeof text, "%s", res->why);
    else if (a->local_cause[0])
        snprintf(text, sizeof text, "%s", a->local_cause);
    if (a->store && !a->lost) {
        if (agent_lost(a, &first) < 0) {
            if (!(res && res->stopped) && !a->local_cause[0]) /* node 0's store is gone */
                snprintf(text, sizeof text, "%s", a->gone_why);
        } else if (first >= 0 && first != a->node_rank) {
            a->lost = 1;
            agent_lost_words(a, first, text, sizeof text);
        } else {
            agent_key(a, key, sizeof key, "cause");
            if (agent_check(a, key, &exists) == 0 && exists)
                agent_get(a, key, text, sizeof text);
        }
    }
    if (!text[0])
        snprintf(text, sizeof text, "node %d (host %s): its ranks failed", a->node_rank, a->host);
    snprintf(cause, cap, "%s", text);
    size_t at = strlen(a->causes);
    snprintf(a->causes + at, sizeof a->causes - at, "%s%s", at ? "\n" : "", text);
    return !a->lost;
}

/* 1 when path holds the row "node_rank,<r>" (the meta.csv this node's leader wrote;
 * probes/run_format.h) */
static int agent_meta_is_nodes(const char *path, int r)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    char line[512], want[64];
    snprintf(want, sizeof want, "%s,%d\n", run_meta_key_name(RUN_META_node_rank), r);
    int found = 0;
    while (!found && fgets(line, sizeof line, f))
        found = strcmp(line, want) == 0;
    fclose(f);
    return found;
}

/* rename dir/name into sub/name when it exists; 0 or -1 (error_set) */
static int agent_move(const char *dir, const char *sub, const char *name)
{
    char from[4400], to[4400];
    snprintf(from, sizeof from, "%s/%s", dir, name);
    snprintf(to, sizeof to, "%s/%s", sub, name);
    if (rename(from, to) == 0 || errno == ENOENT)
        return 0;
    return error_set("agent: cannot move %s into %s: %s", from, sub, strerror(errno));
}

int agent_archive(struct agent *a, int attempt)
{
    char sub[4200], path[4400], name[64];
    snprintf(sub, sizeof sub, "%s/attempt-%d", a->out_dir, attempt);
    if (mkdir(sub, 0777) < 0 && errno != EEXIST)
        return error_set("agent: cannot create %s for the failed attempt's files: %s", sub,
                         strerror(errno));
    int rc = 0;
    for (int i = 0; i < a->nproc && rc == 0; i++) {
        snprintf(name, sizeof name, "rank%d.trace.csv", a->node_rank * a->nproc + i);
        rc = agent_move(a->out_dir, sub, name);
    }
    snprintf(path, sizeof path, "%s/meta.csv", a->out_dir);
    if (rc == 0 && (a->node_rank == 0 || agent_meta_is_nodes(path, a->node_rank))) {
        rc = agent_move(a->out_dir, sub, "meta.csv");
        if (rc == 0)
            rc = agent_move(a->out_dir, sub, "metrics.csv");
    }
    snprintf(path, sizeof path, "%s/checkpoint.safetensors", a->out_dir);
    if (rc == 0 && a->node_rank == 0 && access(path, F_OK) == 0) {
        rc = agent_move(a->out_dir, sub, "checkpoint.safetensors");
        if (rc == 0)
            snprintf(a->latest, sizeof a->latest, "%.4000s/checkpoint.safetensors", sub);
    }
    return rc;
}

void agent_destroy(struct agent *a)
{
    if (!a)
        return;
    if (a->store && a->lost)
        store_abort(a->store);
    else if (a->store)
        store_destroy(a->store);
    free(a);
}
