/* sha256.h — SHA-256 (FIPS 180-4) and HMAC-SHA256 (RFC 2104), and a constant-time compare:
 * what the rendezvous store's challenge-response needs (trainer/comm/store_auth.h), without
 * a crypto library.  Checked against FIPS 180-2's and RFC 4231's test vectors
 * (tests/test_common.c). */
#ifndef DDPPROF_SHA256_H
#define DDPPROF_SHA256_H

#include <stddef.h>
#include <stdint.h>

#define SHA256_BYTES 32
#define SHA256_BLOCK 64

struct sha256 {
    uint32_t h[8];
    uint64_t bytes;           /* hashed so far */
    uint8_t buf[SHA256_BLOCK];
    size_t nbuf;              /* bytes waiting in buf */
};

void sha256_init(struct sha256 *s);
void sha256_update(struct sha256 *s, const void *data, size_t len);
/* The digest of everything given; s must be initialised again before reuse. */
void sha256_final(struct sha256 *s, uint8_t out[SHA256_BYTES]);
void sha256(const void *data, size_t len, uint8_t out[SHA256_BYTES]);

/* HMAC-SHA256 of a message given in parts: init with the key, update, final. */
struct hmac_sha256 {
    struct sha256 inner;
    uint8_t okey[SHA256_BLOCK]; /* the key xor opad */
};

void hmac_sha256_init(struct hmac_sha256 *h, const void *key, size_t key_len);
void hmac_sha256_update(struct hmac_sha256 *h, const void *data, size_t len);
/* The MAC; wipes the key material held in h. */
void hmac_sha256_final(struct hmac_sha256 *h, uint8_t out[SHA256_BYTES]);
void hmac_sha256(const void *key, size_t key_len, const void *msg, size_t len,
                 uint8_t out[SHA256_BYTES]);

/* 1 when the n bytes at a and b are equal, else 0, in a time that depends on n only (a
 * MAC compared this way tells a forger nothing of how many bytes were right). */
int mem_equal_ct(const void *a, const void *b, size_t n);

/* Overwrite n bytes at p with zeros in a way the compiler keeps (secrets going out of use). */
void mem_wipe(void *p, size_t n);

#endif
