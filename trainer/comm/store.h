/* store.h — the rendezvous key-value store (as c10d's TCPStore).
 *
 * Rank 0 hosts a small TCP server (a thread in its own process); every rank, rank 0
 * included, talks to it as a client.  It carries what ranks must agree on: the shm
 * segment name, the NCCL unique id, clock offsets, barriers.  Every call waits at most
 * the timeout given at creation and then fails with an error naming the key. */
#ifndef DDPPROF_STORE_H
#define DDPPROF_STORE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct store;

/* Connect to host:port as `rank` of `world`.  With is_server, first listen on port (0.0.0.0)
 * and serve until store_destroy; a port already in use is a one-line error saying so.
 * Clients retry connecting until timeout_ms (the server may not be up yet); once connected,
 * a reconnect that finds nothing listening fails at once ("lost rank 0's store"): its
 * process is gone.  Who may connect: the job secret in the environment (comm/store_auth.h).
 * NULL + error_set on failure. */
struct store *store_create(const char *host, int port, int is_server, int rank, int world,
                           int timeout_ms);

/* As store_create with is_server, on a free port the kernel picks (no race with another
 * program taking it first); store_port says which, for the other ranks.  host is how this
 * rank reaches its own server (MASTER_ADDR: store_host then names the interface the other
 * hosts use). */
struct store *store_create_any_port(const char *host, int rank, int world, int timeout_ms);

/* The port of the store (the server's listening port) and the host this rank reaches it
 * at (MASTER_ADDR), owned by s. */
int store_port(const struct store *s);
const char *store_host(const struct store *s);

/* *exists = 1 when key is set, else 0; never waits for it.  0 or -1 (error_set). */
int store_check(struct store *s, const char *key, int *exists);

/* 1 when rank's last connection closed without store_destroy (it died, or store_abort),
 * else 0; -1 (error_set) when the store cannot be asked.  *first (may be NULL) gets the
 * first rank that was lost, or -1. */
int store_lost(struct store *s, int rank, int *first);

/* Set key to len bytes of val (overwrites). */
int store_set(struct store *s, const char *key, const void *val, size_t len);

/* Wait until key exists, then copy up to cap bytes into val and its length into *len. */
int store_get(struct store *s, const char *key, void *val, size_t cap, size_t *len);

/* Atomically add delta to the int64 counter at key (created as 0); *result gets the new
 * value (result may be NULL). */
int store_add(struct store *s, const char *key, int64_t delta, int64_t *result);

/* The store host's (rank 0's) CLOCK_MONOTONIC in ns, read by its server thread when the
 * request arrived: one round trip of the clock alignment. */
int store_server_time(struct store *s, int64_t *server_ns);

/* Wait until key exists. */
int store_wait(struct store *s, const char *key);

/* All `world` ranks reach a barrier called `name` (each name may be reused: rounds are
 * counted per name). */
int store_barrier(struct store *s, const char *name);

/* Says goodbye (so this rank does not count as lost, see store_lost) and closes the
 * connection; the server (rank 0) first waits, up to the timeout, until every other rank has
 * closed, so no rank loses the store mid-call. */
void store_destroy(struct store *s);

/* Close at once, without waiting for the other ranks (this rank failed: the others will
 * see the store go away instead of waiting for it). */
void store_abort(struct store *s);

#ifdef __cplusplus
}
#endif
#endif
