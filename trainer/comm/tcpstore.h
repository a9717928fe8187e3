/* tcpstore.h — a minimal client of PyTorch's TCPStore (c10d's store, the one torchrun's agent
 * serves on MASTER_PORT when it sets TORCHELASTIC_USE_AGENT_STORE=True).
 *
 * ddpprof's ranks rendezvous in ddpprof's own store (store.h), hosted by rank 0; under
 * torchrun's default (static) rendezvous MASTER_PORT already belongs to the agent's
 * TCPStore, so rank 0 hosts its store on a free port and publishes that port through the
 * agent's store with tcpstore_set, and the other ranks read it with tcpstore_get.  Only
 * what that needs is spoken: SET, WAIT and GET, as torch 1.13's wire protocol has them
 * (a query byte; strings and byte vectors as a little-endian u64 length and the bytes).
 * Keys are used as given (PyTorch's Python API prefixes "/"; ddpprof's keys do not collide). */
#ifndef DDPPROF_TCPSTORE_H
#define DDPPROF_TCPSTORE_H

#include <stddef.h>

struct tcpstore;

/* Connect to host:port, retrying until timeout_ms (which also bounds every later call).
 * NULL + error_set naming the address on failure. */
struct tcpstore *tcpstore_connect(const char *host, int port, int timeout_ms);

/* Set key to len bytes of val.  0 or -1 (error_set). */
int tcpstore_set(struct tcpstore *t, const char *key, const void *val, size_t len);

/* Wait (up to the timeout) until key exists, then copy up to cap bytes of its value into
 * val and its length into *len.  0 or -1 (error_set naming the key). */
int tcpstore_get(struct tcpstore *t, const char *key, void *val, size_t cap, size_t *len);

void tcpstore_close(struct tcpstore *t);

#endif
