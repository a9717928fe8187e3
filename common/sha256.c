/* sha256.c — SHA-256, HMAC-SHA256 and a constant-time compare (see sha256.h). */
#include "common/sha256.h"

#include <string.h>

static const uint32_t sha256_k[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4,
    0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe,
    0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f,
    0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7,
    0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc,
    0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
    0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116,
    0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
    0xc67178f2};

static uint32_t sha256_rotr(uint32_t x, int n) { return x >> n | x << (32 - n); }

static void sha256_block(struct sha256 *s, const uint8_t *p)
{
    uint32_t w[64];
    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 |
               (uint32_t)p[4 * i + 2] << 8 | (uint32_t)p[4 * i + 3];
    for (int i = 16; i < 64; i++) {
        uint32_t s0 = sha256_rotr(w[i - 15], 7) ^ sha256_rotr(w[i - 15], 18) ^ w[i - 15] >> 3;
        uint32_t s1 = sha256_rotr(w[i - 2], 17) ^ sha256_rotr(w[i - 2], 19) ^ w[i - 2] >> 10;
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = s->h[0], b = s->h[1], c = s->h[2], d = s->h[3];
    uint32_t e = s->h[4], f = s->h[5], g = s->h[6], h = s->h[7];
    for (int i = 0; i < 64; i++) {
        uint32_t t1 = h + (sha256_rotr(e, 6) ^ sha256_rotr(e, 11) ^ sha256_rotr(e, 25)) +
                      ((e & f) ^ (~e & g)) + sha256_k[i] + w[i];
        uint32_t t2 = (sha256_rotr(a, 2) ^ sha256_rotr(a, 13) ^ sha256_rotr(a, 22)) +
                      ((a & b) ^ (a & c) ^ (b & c));
        h = g;
        g = f;
        f = e;
        e = d + t1;
        d = c;
        c = b;
        b = a;
        a = t1 + t2;
    }
    s->h[0] += a;
    s->h[1] += b;
    s->h[2] += c;
    s->h[3] += d;
    s->h[4] += e;
    s->h[5] += f;
    s->h[6] += g;
    s->h[7] += h;
}

void sha256_init(struct sha256 *s)
{
    static const uint32_t h0[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                   0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    memcpy(s->h, h0, sizeof h0);
    s->bytes = 0;
    s->nbuf = 0;
}

void sha256_update(struct sha256 *s, const void *data, size_t len)
{
    const uint8_t *p = data;
    s->bytes += len;
    if (s->nbuf) {
        size_t take = SHA256_BLOCK - s->nbuf < len ? SHA256_BLOCK - s->nbuf : len;
        memcpy(s->buf + s->nbuf, p, take);
        s->nbuf += take;
        p += take;
        len -= take;
        if (s->nbuf < SHA256_BLOCK)
            return;
        sha256_block(s, s->buf);
        s->nbuf = 0;
    }
    for (; len >= SHA256_BLOCK; p += SHA256_BLOCK, len -= SHA256_BLOCK)
        sha256_block(s, p);
    if (len)
        memcpy(s->buf, p, len);
    s->nbuf = len;
}

void sha256_final(struct sha256 *s, uint8_t out[SHA256_BYTES])
{
    uint64_t bits = s->bytes * 8;
    s->buf[s->nbuf++] = 0x80;
    if (s->nbuf > SHA256_BLOCK - 8) {
        memset(s->buf + s->nbuf, 0, SHA256_BLOCK - s->nbuf);
        sha256_block(s, s->buf);
        s->nbuf = 0;
    }
    memset(s->buf + s->nbuf, 0, SHA256_BLOCK - 8 - s->nbuf);
    for (int i = 0; i < 8; i++)
        s->buf[SHA256_BLOCK - 1 - i] = (uint8_t)(bits >> (8 * i));
    sha256_block(s, s->buf);
    for (int i = 0; i < 8; i++) {
        out[4 * i] = (uint8_t)(s->h[i] >> 24);
        out[4 * i + 1] = (uint8_t)(s->h[i] >> 16);
        out[4 * i + 2] = (uint8_t)(s->h[i] >> 8);
        out[4 * i + 3] = (uint8_t)s->h[i];
    }
    mem_wipe(s, sizeof *s);
}

void sha256(const void *data, size_t len, uint8_t out[SHA256_BYTES])
{
    struct sha256 s;
    sha256_init(&s);
    sha256_update(&s, data, len);
    sha256_final(&s, out);
}

void hmac_sha256_init(struct hmac_sha256 *h, const void *key, size_t key_len)
{
    uint8_t k[SHA256_BLOCK] = {0}, ikey[SHA256_BLOCK];
    if (key_len > SHA256_BLOCK) /* a long key is hashed first (RFC 2104) */
        sha256(key, key_len, k);
    else if (key_len)
        memcpy(k, key, key_len);
    for (int i = 0; i < SHA256_BLOCK; i++) {
        ikey[i] = k[i] ^ 0x36;
        h->okey[i] = k[i] ^ 0x5c;
    }
    sha256_init(&h->inner);
    sha256_update(&h->inner, ikey, sizeof ikey);
    mem_wipe(k, sizeof k);
    mem_wipe(ikey, sizeof ikey);
}

void hmac_sha256_update(struct hmac_sha256 *h, const void *data, size_t len)
{
    sha256_update(&h->inner, data, len);
}

void hmac_sha256_final(struct hmac_sha256 *h, uint8_t out[SHA256_BYTES])
{
    uint8_t inner[SHA256_BYTES];
    struct sha256 outer;
    sha256_final(&h->inner, inner);
    sha256_init(&outer);
    sha256_update(&outer, h->okey, sizeof h->okey);
    sha256_update(&outer, inner, sizeof inner);
    sha256_final(&outer, out);
    mem_wipe(inner, sizeof inner);
    mem_wipe(h, sizeof *h);
}

void hmac_sha256(const void *key, size_t key_len, const void *msg, size_t len,
                 uint8_t out[SHA256_BYTES])
{
    struct hmac_sha256 h;
    hmac_sha256_init(&h, key, key_len);
    hmac_sha256_update(&h, msg, len);
    hmac_sha256_final(&h, out);
}

int mem_equal_ct(const void *a, const void *b, size_t n)
{
    const volatile uint8_t *x = a, *y = b;
    uint8_t diff = 0;
    for (size_t i = 0; i < n; i++)
        diff |= (uint8_t)(x[i] ^ y[i]);
    return diff == 0;
}

void mem_wipe(void *p, size_t n)
{
    volatile uint8_t *v = p;
    while (n--)
        *v++ = 0;
}
