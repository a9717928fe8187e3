/* safetensors_format.h — what the safetensors reader (safetensors_read.c) and writer
 * (safetensors_write.c) share: the dtype table, shape sizes and metadata pairs.  Internal
 * to trainer/io/safetensors*; the API is safetensors.h. */
#ifndef DDPPROF_SAFETENSORS_FORMAT_H
#define DDPPROF_SAFETENSORS_FORMAT_H

#include "io/safetensors.h"

#include <stddef.h>
#include <stdint.h>

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "safetensors reads and writes tensor bytes as they are in memory: little-endian only"
#endif

struct st_dtype_info {
    const char *name;
    size_t size;
    int order; /* position in the reference Dtype enum: the writer sorts by it, descending */
};

#define ST_NUM_DTYPES (ST_U8 + 1) /* the last enum st_dtype, plus one */

/* indexed by enum st_dtype */
extern const struct st_dtype_info st_dtypes[ST_NUM_DTYPES];

/* the enum st_dtype called s ("F32", ...), or -1 */
int st_dtype_parse(const char *s);

/* numel and nbytes of a shape, or -1 on a negative dimension or overflow (beyond 2^62
 * bytes) */
int st_shape_bytes(enum st_dtype dtype, int ndim, const int64_t *shape, int64_t *numel,
                   size_t *nbytes);

/* one __metadata__ entry; both strings owned by the reader or writer holding it */
struct st_meta {
    char *key, *value;
};

#endif
