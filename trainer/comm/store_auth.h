/* store_auth.h — who may speak to the rendezvous store (store.h): the job's secret, the
 * challenge-response that proves it, and the check of a peer's uid on this host; internal
 * to trainer/comm/store* (the launcher uses store_auth_new_secret).
 *
 * Every process decides its mode from its environment (store_auth_from_env):
 *   secret  DDPPROF_JOB_SECRET (16 to 1024 bytes), or else DDPPROF_JOB_SECRET_FILE naming a
 *           regular file of ours that nobody else may read or write (mode 0600 or
 *           stricter) holding it (one trailing line break is not part of it).  Every
 *           connection proves the secret before anything else is read from it, and the
 *           server proves it back (a stranger's server cannot pose as rank 0's).
 *   local   no secret, and the store on loopback (MASTER_ADDR 127.x.y.z or "localhost"):
 *           only this host's processes can reach it, and of those only this uid's are
 *           served (below).
 *   open    DDPPROF_JOB_SECRET=none: no secret, anyone who reaches the port and says a
 *           valid hello is served (as PyTorch's TCPStore); a warning says so once.
 * No secret for a store reachable from other hosts is refused (one line saying what to
 * set).  In every mode a peer on this host (its socket found by the kernel's socket
 * diagnostics, or /proc/net/tcp) must belong to this process's uid, at either end: the
 * server refuses other users' clients, and a client refuses a server another user runs.
 *
 * The handshake (store_wire.h frames it): on accept the server sends a challenge (its
 * mode and a fresh 32-byte nonce); the client answers HELLO with its rank, world size, its
 * own nonce and HMAC-SHA256(secret, "ddpprof-store-hello" || server nonce || client nonce
 * || rank || world); the server compares in constant time and answers OK with
 * HMAC-SHA256(secret, "ddpprof-store-welcome" || the same), which the client checks.
 * Without a secret both MACs are absent (zeros) and unchecked.  Nothing protects the
 * connection after the handshake: on a network an attacker who can read and alter its
 * packets can alter the job (see docs/USAGE.md, "What the rendezvous store trusts"). */
#ifndef DDPPROF_STORE_AUTH_H
#define DDPPROF_STORE_AUTH_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define STORE_SECRET_ENV "DDPPROF_JOB_SECRET"
#define STORE_SECRET_FILE_ENV "DDPPROF_JOB_SECRET_FILE"
#define STORE_SECRET_NONE "none" /* DDPPROF_JOB_SECRET=none: the open mode */
#define STORE_SECRET_MIN 16
#define STORE_SECRET_MAX 1024
#define STORE_SECRET_HEX 64 /* store_auth_new_secret's text: 32 random bytes in hex */
#define STORE_NONCE_BYTES 32
#define STORE_MAC_BYTES 32

enum store_auth_mode { STORE_AUTH_LOCAL = 0, STORE_AUTH_SECRET = 1, STORE_AUTH_OPEN = 2 };

struct store_auth {
    int mode; /* enum store_auth_mode */
    size_t len;
    uint8_t secret[STORE_SECRET_MAX];
};

/* The mode and secret for a store at host (MASTER_ADDR) from the environment, as above.
 * 0, or -1 with error_set (a secret too short or too long, a file others may read, no
 * secret for a store other hosts can reach). */
int store_auth_from_env(struct store_auth *a, const char *host);

/* The secret mode with len bytes of secret (tests; len within STORE_SECRET_MIN..MAX). */
int store_auth_from_secret(struct store_auth *a, const void *secret, size_t len);

/* 1 when host names this machine's loopback: an IPv4 literal 127.x.y.z, or "localhost" */
int store_auth_host_is_loopback(const char *host);

/* n bytes from the kernel's random generator (getrandom, else /dev/urandom).  0, or -1
 * with error_set. */
int store_auth_random(void *buf, size_t n);

/* A fresh job secret: 32 random bytes as STORE_SECRET_HEX hex digits and a NUL.  0 or -1
 * (error_set). */
int store_auth_new_secret(char hex[STORE_SECRET_HEX + 1]);

/* The client's proof (from_server 0) or the server's (1) for this handshake. */
void store_auth_mac(const struct store_auth *a, int from_server,
                    const uint8_t server_nonce[STORE_NONCE_BYTES],
                    const uint8_t client_nonce[STORE_NONCE_BYTES], uint32_t rank, uint32_t world,
                    uint8_t out[STORE_MAC_BYTES]);

/* Whether mac is the proof store_auth_mac gives, compared in constant time: 1 or 0. */
int store_auth_check(const struct store_auth *a, int from_server,
                     const uint8_t server_nonce[STORE_NONCE_BYTES],
                     const uint8_t client_nonce[STORE_NONCE_BYTES], uint32_t rank,
                     uint32_t world, const uint8_t mac[STORE_MAC_BYTES]);

/* The other end of the connected TCP socket fd, when it is a socket of this host (in this
 * network namespace): 1 with *uid its owner (a server's socket not yet accepted has its
 * listener's) and *established whether the connection is open at that end (one closed
 * already has no owner to tell: TIME_WAIT says uid 0); 0 when no socket of this host has
 * its address (a peer on another host); -1 when neither can be told (errno set). */
int store_auth_peer_uid(int fd, uid_t *uid, int *established);

/* The warning the open mode gives, once per process, on stderr (what names the store). */
void store_auth_warn_open(const char *what);

#endif
