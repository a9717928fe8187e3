/* strpool.c — string interning (see strpool.h): word-at-a-time hashing, linear probing,
 * one growing character buffer. */
#include "report/input/strpool.h"

#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/vec.h"

/* 8 bytes at a time: trace strings are short, and this runs for three fields per row. */
static uint64_t strpool_hash(const char *s, size_t len)
{
    uint64_t h = 0x9e3779b97f4a7c15ull ^ len;
    while (len >= 8) {
        uint64_t w;
        memcpy(&w, s, 8);
        h = (h ^ w) * 0xff51afd7ed558ccdull;
        h ^= h >> 32;
        s += 8;
        len -= 8;
    }
    if (len) {
        uint64_t w = 0;
        memcpy(&w, s, len);
        h = (h ^ w) * 0xc4ceb9fe1a85ec53ull;
    }
    h ^= h >> 29;
    return h;
}

void strpool_init(struct strpool *p)
{
    memset(p, 0, sizeof *p);
}

void strpool_free(struct strpool *p)
{
    free(p->buf);
    free(p->offs);
    free(p->lens);
    free(p->slots);
    memset(p, 0, sizeof *p);
}

static int strpool_equal(const struct strpool *p, uint32_t id, const char *s, size_t len)
{
    return p->lens[id] == len && memcmp(p->buf + p->offs[id], s, len) == 0;
}

/* Slot index of s in the table: either the slot holding it or the empty slot to use. */
static uint32_t strpool_slot(const struct strpool *p, const char *s, size_t len)
{
    uint32_t mask = p->nslots - 1;
    uint32_t i = (uint32_t)strpool_hash(s, len) & mask;
    while (p->slots[i] != 0 && !strpool_equal(p, p->slots[i] - 1, s, len))
        i = (i + 1) & mask;
    return i;
}

static int strpool_grow_table(struct strpool *p)
{
    uint32_t nslots = p->nslots ? p->nslots * 2 : 64;
    if (nslots == 0)
        return error_set("string pool: more than 2^31 distinct strings in the traces");
    uint32_t *slots = calloc(nslots, sizeof *slots);
    if (!slots)
        return error_set("string pool: out of memory growing the table to %u slots", nslots);
    free(p->slots);
    p->slots = slots;
    p->nslots = nslots;
    for (uint32_t id = 0; id < p->n; id++)
        p->slots[strpool_slot(p, p->buf + p->offs[id], p->lens[id])] = id + 1;
    return 0;
}

uint32_t strpool_intern(struct strpool *p, const char *s, size_t len)
{
    len = strnlen(s, len); /* a NUL byte ends the string: every stored string is a C string */
    if (len > UINT32_MAX) {
        error_set("string pool: a %zu-byte string is too long", len);
        return STRPOOL_NONE;
    }
    if (p->nslots == 0 && strpool_grow_table(p) < 0)
        return STRPOOL_NONE;
    uint32_t i = strpool_slot(p, s, len);
    if (p->slots[i] != 0)
        return p->slots[i] - 1;
    if (p->n == UINT32_MAX - 1) {
        error_set("string pool: too many distinct strings in the traces");
        return STRPOOL_NONE;
    }
    if (VEC_RESERVE(p->buf, p->cap, p->len + len + 1)) {
        error_set("string pool: out of memory growing to %zu bytes", p->len + len + 1);
        return STRPOOL_NONE;
    }
    if (VEC_RESERVE(p->offs, p->cap_offs, (size_t)p->n + 1) ||
        VEC_RESERVE(p->lens, p->cap_lens, (size_t)p->n + 1)) {
        error_set("string pool: out of memory growing to %u strings", p->n + 1);
        return STRPOOL_NONE;
    }
    uint32_t id = p->n++;
    p->offs[id] = p->len;
    p->lens[id] = (uint32_t)len;
    memcpy(p->buf + p->len, s, len);
    p->buf[p->len + len] = '\0';
    p->len += len + 1;
    p->slots[i] = id + 1;
    if ((uint64_t)p->n * 2 > p->nslots && strpool_grow_table(p) < 0)
        return STRPOOL_NONE;
    return id;
}

uint32_t strpool_find(const struct strpool *p, const char *s)
{
    if (p->nslots == 0)
        return STRPOOL_NONE;
    uint32_t i = strpool_slot(p, s, strlen(s));
    return p->slots[i] ? p->slots[i] - 1 : STRPOOL_NONE;
}

const char *strpool_get(const struct strpool *p, uint32_t id)
{
    return id < p->n ? p->buf + p->offs[id] : "";
}
