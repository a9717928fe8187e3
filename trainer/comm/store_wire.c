/* store_wire.c — the rendezvous store's message encoding (see store_wire.h). */
#include "comm/store_wire.h"

#include "common/parse.h"

#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

void store_wire_put_u16(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

void store_wire_put_u32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

void store_wire_put_i64(uint8_t *p, int64_t v)
{
    uint64_t u = (uint64_t)v;
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(u >> (8 * i));
}

uint32_t store_wire_get_u16(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8;
}

uint32_t store_wire_get_u32(const uint8_t *p)
{
    uint32_t v = 0;
    for (int i = 0; i < 4; i++)
        v |= (uint32_t)p[i] << (8 * i);
    return v;
}

int64_t store_wire_get_i64(const uint8_t *p)
{
    uint64_t u = 0;
    for (int i = 0; i < 8; i++)
        u |= (uint64_t)p[i] << (8 * i);
    return (int64_t)u;
}

void store_wire_put_request(uint8_t *h, int op, uint32_t klen, uint32_t vlen)
{
    h[0] = (uint8_t)op;
    store_wire_put_u16(h + 1, klen);
    store_wire_put_u32(h + 3, vlen);
}

void store_wire_put_reply(uint8_t *h, int status, uint32_t len)
{
    h[0] = (uint8_t)status;
    store_wire_put_u32(h + 1, len);
}

long store_wire_decode_request(const uint8_t *buf, size_t len, struct store_request *req)
{
    if (len < STORE_REQ_HEADER)
        return 0;
    uint32_t klen = store_wire_get_u16(buf + 1), vlen = store_wire_get_u32(buf + 3);
    if (klen > STORE_KEY_MAX || vlen > STORE_VALUE_MAX)
        return -1;
    if (memchr(buf + STORE_REQ_HEADER, '\0', klen < len - STORE_REQ_HEADER
                                                 ? klen
                                                 : len - STORE_REQ_HEADER))
        return -1;
    size_t total = STORE_REQ_HEADER + (size_t)klen + vlen;
    if (len < total)
        return 0;
    req->op = buf[0];
    memcpy(req->key, buf + STORE_REQ_HEADER, klen);
    req->key[klen] = '\0';
    req->value = buf + STORE_REQ_HEADER + klen;
    req->value_len = vlen;
    return (long)total;
}

void store_wire_put_hello(uint8_t out[STORE_HELLO_VALUE], uint32_t rank, uint32_t world,
                          const uint8_t nonce[32], const uint8_t mac[32])
{
    store_wire_put_u32(out, rank);
    store_wire_put_u32(out + 4, world);
    memcpy(out + 8, nonce, 32);
    memcpy(out + 40, mac, 32);
}

int store_wire_decode_hello(const uint8_t *val, uint32_t len, int *rank, int *world,
                            const uint8_t **nonce, const uint8_t **mac)
{
    if (len != STORE_HELLO_VALUE)
        return -1;
    uint32_t r = store_wire_get_u32(val), w = store_wire_get_u32(val + 4);
    if (r > INT_MAX || w > INT_MAX)
        return -1;
    *rank = (int)r;
    *world = (int)w;
    *nonce = val + 8;
    *mac = val + 40;
    return 0;
}

void store_wire_put_challenge(uint8_t out[STORE_CHALLENGE_BYTES], int mode,
                              const uint8_t nonce[32])
{
    memcpy(out, STORE_CHALLENGE_MAGIC, 8);
    out[8] = (uint8_t)mode;
    memcpy(out + 9, nonce, 32);
}

int store_wire_decode_challenge(const uint8_t *val, uint32_t len, int *mode,
                                const uint8_t **nonce)
{
    if (len != STORE_CHALLENGE_BYTES || memcmp(val, STORE_CHALLENGE_MAGIC, 8) != 0 || val[8] > 2)
        return -1;
    *mode = val[8];
    *nonce = val + 9;
    return 0;
}

int store_wire_decode_add(const uint8_t *val, uint32_t len, int64_t *delta)
{
    if (len != 8)
        return -1;
    *delta = store_wire_get_i64(val);
    return 0;
}

int store_wire_parse_counter(const uint8_t *val, uint32_t len, int64_t *out)
{
    if (len > 31) /* a counter's text is at most 31 bytes */
        return -1;
    return parse_i64((const char *)val, len, out);
}

int store_wire_decode_reply(const uint8_t *h, int *status, uint32_t *len)
{
    if (h[0] != STORE_REPLY_OK && h[0] != STORE_REPLY_ERROR)
        return -1;
    *status = h[0];
    *len = store_wire_get_u32(h + 1);
    return *len > STORE_VALUE_MAX + 1024 ? -1 : 0;
}

void store_wire_nodelay(int fd)
{
    int one = 1, idle_s = 2, interval_s = 1, probes = 3;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle_s, sizeof idle_s);
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval_s, sizeof interval_s);
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &probes, sizeof probes);
}
