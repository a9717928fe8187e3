/* store_wire.h — the rendezvous store's message encoding, shared by its server
 * (store_server.c) and its client (store.c); internal to trainer/comm/store*.
 *
 * Wire format (integers little-endian):
 *   request: op u8, key length u16, value length u32, key bytes, value bytes
 *   reply:   status u8 (0 ok, 1 error), length u32, bytes (value, counter, or error text)
 *   ADD's value and reply are an int64; CHECK's reply is one byte, 1 when the key exists
 *   (it never waits).
 * The handshake (store_auth.h says why): the server speaks first, a reply whose bytes are
 * the challenge, STORE_CHALLENGE_MAGIC (8 bytes), the mode u8 (enum store_auth_mode) and
 * the server's nonce (32 bytes); the client's first request is HELLO, whose value is rank
 * u32, world u32, the client's nonce (32 bytes) and its MAC (32 bytes; zeros without a
 * secret); the server answers OK with its own MAC (32 bytes; none without a secret) or
 * ERROR, and closes a connection whose hello it refused.
 * Counters are stored as decimal text, so get() of a counter key reads "3".
 *
 * Departures: a client that closes its store cleanly first sets STORE_KEY_BYE/<rank>; when
 * the last connection of a rank closes without that key, the server sets
 * STORE_KEY_LOST/<rank> (and STORE_KEY_LOST to the first such rank), so the others can tell
 * a process that died from one that finished. */
#ifndef DDPPROF_STORE_WIRE_H
#define DDPPROF_STORE_WIRE_H

#include <stddef.h>
#include <stdint.h>

#define STORE_KEY_MAX 255
#define STORE_VALUE_MAX (1u << 20)
#define STORE_REQ_HEADER 7   /* op u8, key length u16, value length u32 */
#define STORE_REPLY_HEADER 5 /* status u8, length u32 */
#define STORE_REQ_MAX (STORE_REQ_HEADER + STORE_KEY_MAX + STORE_VALUE_MAX)
#define STORE_CHALLENGE_MAGIC "ddpstor1"
#define STORE_CHALLENGE_BYTES (8 + 1 + 32)  /* magic, mode, server nonce */
#define STORE_HELLO_VALUE (4 + 4 + 32 + 32) /* rank, world, client nonce, MAC */

enum store_op { STORE_OP_HELLO = 1, STORE_OP_SET, STORE_OP_GET, STORE_OP_ADD, STORE_OP_WAIT,
                STORE_OP_TIME, STORE_OP_CHECK };

#define STORE_KEY_BYE "store/bye"
#define STORE_KEY_LOST "store/lost"
enum store_status { STORE_REPLY_OK = 0, STORE_REPLY_ERROR = 1 };

/* little-endian integers at p */
void store_wire_put_u16(uint8_t *p, uint32_t v);
void store_wire_put_u32(uint8_t *p, uint32_t v);
void store_wire_put_i64(uint8_t *p, int64_t v);
uint32_t store_wire_get_u16(const uint8_t *p);
uint32_t store_wire_get_u32(const uint8_t *p);
int64_t store_wire_get_i64(const uint8_t *p);

/* the STORE_REQ_HEADER bytes at h of a request with a klen-byte key and a vlen-byte value */
void store_wire_put_request(uint8_t *h, int op, uint32_t klen, uint32_t vlen);

/* the STORE_REPLY_HEADER bytes at h of a reply with len bytes after it */
void store_wire_put_reply(uint8_t *h, int status, uint32_t len);

/* One request as it arrived: key is NUL-terminated (a key holding a NUL byte is not
 * decoded), value points into the decoded buffer. */
struct store_request {
    int op;                         /* as sent: an unknown op is the server's to answer */
    char key[STORE_KEY_MAX + 1];
    const uint8_t *value;
    uint32_t value_len;
};

/* Decode the request at the start of buf[0..len), bytes from a peer that may be anything.
 * Returns the bytes it takes (> 0) with *req filled, 0 when buf holds only part of it, or
 * -1 when it cannot be ours: a key or value over STORE_KEY_MAX / STORE_VALUE_MAX, a NUL
 * byte in the key (the connection should be closed: nothing after it can be framed). */
long store_wire_decode_request(const uint8_t *buf, size_t len, struct store_request *req);

/* HELLO's value as the client sends it */
void store_wire_put_hello(uint8_t out[STORE_HELLO_VALUE], uint32_t rank, uint32_t world,
                          const uint8_t nonce[32], const uint8_t mac[32]);

/* HELLO's value: 0 with rank, world and pointers to the client's nonce and MAC inside val;
 * -1 when it is not STORE_HELLO_VALUE bytes (an older ddpprof's hello was 8) or rank or
 * world is above INT_MAX */
int store_wire_decode_hello(const uint8_t *val, uint32_t len, int *rank, int *world,
                            const uint8_t **nonce, const uint8_t **mac);

/* The challenge's bytes (after its reply header) */
void store_wire_put_challenge(uint8_t out[STORE_CHALLENGE_BYTES], int mode,
                              const uint8_t nonce[32]);

/* A challenge as the client receives it (len bytes after an OK reply header): 0 with the
 * mode and a pointer to the nonce inside val; -1 when it is not one (another program, or
 * a ddpprof older than this one, on that port) */
int store_wire_decode_challenge(const uint8_t *val, uint32_t len, int *mode,
                                const uint8_t **nonce);

/* ADD's value: 0 and the delta; -1 when it is not 8 bytes */
int store_wire_decode_add(const uint8_t *val, uint32_t len, int64_t *delta);

/* A stored counter: strict decimal int64 text (no sign but '-', no spaces, no NUL);
 * 0 or -1 */
int store_wire_parse_counter(const uint8_t *val, uint32_t len, int64_t *out);

/* A reply header (STORE_REPLY_HEADER bytes) from the server: 0 with *status and *len, or
 * -1 when the status is neither OK nor ERROR or len is over STORE_VALUE_MAX + 1024 (an
 * error text may be longer than a value, never by more) */
int store_wire_decode_reply(const uint8_t *h, int *status, uint32_t *len);

/* TCP_NODELAY on a store connection (either end): every message is small and waits for
 * its answer, so Nagle's delay would be pure latency.  Also TCP keepalive probing after 2 s
 * of silence, every 1 s, 3 times: the server notices a host that vanished without closing
 * its connections (power off, cable) in about 5 s instead of hours. */
void store_wire_nodelay(int fd);

#endif
