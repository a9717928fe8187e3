/* store_server.h — the rendezvous store's server: one thread in the host rank's process
 * serving every rank's client (store.c); internal to trainer/comm/store*. */
#ifndef DDPPROF_STORE_SERVER_H
#define DDPPROF_STORE_SERVER_H

#include <stdint.h>

struct store_auth;
struct store_server;

/* Listen on port (0: a free port the kernel picks) and serve `world` ranks from a new
 * thread; rank is the host rank (its clients do not count as "other ranks" in
 * store_server_stop).  host is the address the ranks reach it at (MASTER_ADDR): on loopback
 * (127.x.y.z, "localhost") it listens on 127.0.0.1 only, else on every interface (0.0.0.0).
 * Who may connect: auth (copied; store_auth.h), and what it accepts from peers that are not
 * ranks: see store_server.c.  A port already in use is a one-line error saying so.  NULL +
 * error_set on failure. */
struct store_server *store_server_start(const char *host, int port, int rank, int world,
                                        const struct store_auth *auth);

/* The port it listens on. */
int store_server_port(const struct store_server *srv);

/* Wait, until deadline_ns on clock_now_ns()'s clock, for every other rank to have
 * connected and disconnected, then stop the thread and free srv and everything it holds. */
void store_server_stop(struct store_server *srv, int64_t deadline_ns);

#endif
