/* strpool.h — string interning for the trace reader: each distinct string (a phase, a
 * kind, a kernel name) is stored once and named by a dense 32-bit id, so trace rows stay
 * small flat structs.  Memory is linear in the total length of the distinct strings. */
#ifndef DDPPROF_STRPOOL_H
#define DDPPROF_STRPOOL_H

#include <stddef.h>
#include <stdint.h>

#define STRPOOL_NONE UINT32_MAX

struct strpool {
    char *buf;          /* the strings, each NUL-terminated, back to back */
    size_t len, cap;
    size_t *offs;       /* id -> offset in buf */
    uint32_t *lens;     /* id -> length */
    size_t cap_offs, cap_lens;
    uint32_t n;
    uint32_t *slots;    /* open-addressing hash table of id + 1 (0 = empty) */
    uint32_t nslots;    /* a power of two */
};

/* An empty pool; free it with strpool_free. */
void strpool_init(struct strpool *p);
void strpool_free(struct strpool *p);

/* The id of s[0..len) (len bytes, need not be NUL-terminated), adding it if new.
 * Returns STRPOOL_NONE after error_set() when memory runs out. */
uint32_t strpool_intern(struct strpool *p, const char *s, size_t len);

/* The id of the NUL-terminated s, or STRPOOL_NONE when it was never interned. */
uint32_t strpool_find(const struct strpool *p, const char *s);

/* The string of id (valid until the pool grows or is freed; copy it to keep it). */
const char *strpool_get(const struct strpool *p, uint32_t id);

#endif
