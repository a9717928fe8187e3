/* store_raw.h — a rendezvous-store client written by hand (trainer/comm/store_wire.h,
 * store_auth.h), for the tests that play a stranger or an impostor at a store
 * (test_store, test_store_strangers): exact reads with a deadline, the client's half of
 * the handshake, and the status of a reply.  fd is a non-blocking connected socket. */
#ifndef DDPPROF_TESTS_STORE_RAW_H
#define DDPPROF_TESTS_STORE_RAW_H

#include "comm/store_auth.h"
#include "comm/store_wire.h"
#include "common/clock.h"

#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>

/* Exactly len bytes within limit_s: 0, or -1 (closed first, or too slow). */
static inline int store_raw_recv(int fd, uint8_t *p, size_t len, double limit_s)
{
    double end = clock_now_s() + limit_s;
    while (len) {
        ssize_t n = recv(fd, p, len, MSG_DONTWAIT);
        if (n > 0) {
            p += n;
            len -= (size_t)n;
            continue;
        }
        if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
            return -1;
        double left = end - clock_now_s();
        struct pollfd pf = {.fd = fd, .events = POLLIN};
        if (left <= 0 || poll(&pf, 1, (int)(left * 1000) + 1) < 0)
            return -1;
    }
    return 0;
}

/* The client's half of the handshake on fd: read the server's challenge, send the hello of
 * rank of world proving secret (NULL: none, the MAC all zeros).  0 once the hello is sent;
 * -1 when no challenge came within 3 s (the server closed the connection unanswered). */
static inline int store_raw_hello(int fd, int rank, int world, const char *secret)
{
    uint8_t h[STORE_REPLY_HEADER], ch[STORE_CHALLENGE_BYTES];
    int status, mode;
    uint32_t len;
    const uint8_t *snonce;
    if (store_raw_recv(fd, h, sizeof h, 3.0) < 0 ||
        store_wire_decode_reply(h, &status, &len) < 0 || len != sizeof ch ||
        store_raw_recv(fd, ch, sizeof ch, 3.0) < 0 ||
        store_wire_decode_challenge(ch, len, &mode, &snonce) < 0)
        return -1;
    uint8_t cnonce[STORE_NONCE_BYTES] = {1, 2, 3}, mac[STORE_MAC_BYTES] = {0};
    struct store_auth a;
    if (secret && store_auth_from_secret(&a, secret, strlen(secret)) == 0)
        store_auth_mac(&a, 0, snonce, cnonce, (uint32_t)rank, (uint32_t)world, mac);
    uint8_t req[STORE_REQ_HEADER + STORE_HELLO_VALUE];
    store_wire_put_request(req, STORE_OP_HELLO, 0, STORE_HELLO_VALUE);
    store_wire_put_hello(req + STORE_REQ_HEADER, (uint32_t)rank, (uint32_t)world, cnonce, mac);
    ssize_t n = send(fd, req, sizeof req, MSG_NOSIGNAL | MSG_DONTWAIT);
    (void)n;
    return 0;
}

/* The status of the next reply on fd (its bytes discarded), or -1 when the connection
 * closed first or nothing came within limit_s. */
static inline int store_raw_reply(int fd, double limit_s)
{
    uint8_t h[STORE_REPLY_HEADER], body[256];
    int status;
    uint32_t len;
    if (store_raw_recv(fd, h, sizeof h, limit_s) < 0 ||
        store_wire_decode_reply(h, &status, &len) < 0)
        return -1;
    while (len) {
        uint32_t take = len < sizeof body ? len : (uint32_t)sizeof body;
        if (store_raw_recv(fd, body, take, limit_s) < 0)
            return -1;
        len -= take;
    }
    return status;
}

#endif
