/* fuzz_store_wire.c — the rendezvous store's wire protocol from a malicious or confused
 * peer (trainer/comm/store_wire.c): the bytes as a stream of requests, as the server's
 * connection loop decodes them (store_wire_decode_request, then the HELLO and ADD values
 * and the counter text an ADD finds), and as a stream of replies, as a client decodes
 * them (store_wire_decode_reply, and the server's challenge in them).
 *
 * Every decoded request must lie inside the bytes, with a key of at most STORE_KEY_MAX
 * bytes and no NUL; a partial request is never decoded; decoding never reads past the
 * end (the sanitizers see that). */
#include "fuzz/fuzz_util.h"

#include "comm/store_wire.h"

#include <string.h>

static void fuzz_requests(const uint8_t *data, size_t size)
{
    size_t off = 0;
    while (off < size) {
        struct store_request req;
        long n = store_wire_decode_request(data + off, size - off, &req);
        if (n <= 0) {
            FUZZ_CHECK(n == 0 || n == -1, "decode returned %ld", n);
            if (n == 0) /* only part of a request: it must be shorter than its frame */
                FUZZ_CHECK(size - off < STORE_REQ_HEADER ||
                               size - off < STORE_REQ_HEADER +
                                                store_wire_get_u16(data + off + 1) +
                                                (size_t)store_wire_get_u32(data + off + 3),
                           "a whole request at %zu was not decoded", off);
            return;
        }
        size_t klen = strlen(req.key);
        FUZZ_CHECK((size_t)n == STORE_REQ_HEADER + klen + req.value_len && (size_t)n <= size - off,
                   "request at %zu: %ld bytes for a %zu-byte key and %u-byte value", off, n,
                   klen, req.value_len);
        FUZZ_CHECK(klen <= STORE_KEY_MAX && req.value_len <= STORE_VALUE_MAX &&
                       req.value == data + off + STORE_REQ_HEADER + klen,
                   "request at %zu out of its frame", off);
        int rank, world;
        int64_t v;
        const uint8_t *nonce, *mac;
        if (req.op == STORE_OP_HELLO &&
            store_wire_decode_hello(req.value, req.value_len, &rank, &world, &nonce, &mac) == 0)
            FUZZ_CHECK(rank >= 0 && world >= 0 && req.value_len == STORE_HELLO_VALUE &&
                           nonce == req.value + 8 && mac == req.value + 40,
                       "hello from rank %d of %d, %u bytes", rank, world, req.value_len);
        if (req.op == STORE_OP_ADD)
            store_wire_decode_add(req.value, req.value_len, &v);
        if (store_wire_parse_counter(req.value, req.value_len, &v) == 0)
            for (uint32_t i = 0; i < req.value_len; i++)
                FUZZ_CHECK((req.value[i] >= '0' && req.value[i] <= '9') ||
                               (i == 0 && req.value[i] == '-'),
                           "counter text with byte %u taken as %lld", req.value[i],
                           (long long)v);
        off += (size_t)n;
    }
}

static void fuzz_replies(const uint8_t *data, size_t size)
{
    size_t off = 0;
    while (size - off >= STORE_REPLY_HEADER) {
        int status;
        uint32_t len;
        if (store_wire_decode_reply(data + off, &status, &len) < 0)
            return;
        FUZZ_CHECK((status == STORE_REPLY_OK || status == STORE_REPLY_ERROR) &&
                       len <= STORE_VALUE_MAX + 1024,
                   "reply status %d length %u", status, len);
        if (size - off - STORE_REPLY_HEADER < len)
            return;
        int mode;
        const uint8_t *nonce;
        if (store_wire_decode_challenge(data + off + STORE_REPLY_HEADER, len, &mode, &nonce) == 0)
            FUZZ_CHECK(len == STORE_CHALLENGE_BYTES && mode >= 0 && mode <= 2 &&
                           nonce == data + off + STORE_REPLY_HEADER + 9,
                       "a challenge of %u bytes, mode %d", len, mode);
        off += STORE_REPLY_HEADER + len;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_requests(data, size);
    fuzz_replies(data, size);
    return 0;
}
