/* safetensors_format.c — the dtype table and shape sizes of safetensors files (see
 * safetensors_format.h). */
#include "io/safetensors_format.h"

#include <string.h>

const struct st_dtype_info st_dtypes[ST_NUM_DTYPES] = {
    [ST_F32] = {"F32", 4, 11}, [ST_F16] = {"F16", 2, 7}, [ST_BF16] = {"BF16", 2, 8},
    [ST_I64] = {"I64", 8, 13}, [ST_I32] = {"I32", 4, 9}, [ST_U8] = {"U8", 1, 1},
};

size_t st_dtype_size(enum st_dtype dtype) { return st_dtypes[dtype].size; }

const char *st_dtype_name(enum st_dtype dtype) { return st_dtypes[dtype].name; }

int st_dtype_parse(const char *s)
{
    for (int i = 0; i < ST_NUM_DTYPES; i++)
        if (strcmp(s, st_dtypes[i].name) == 0)
            return i;
    return -1;
}

int st_shape_bytes(enum st_dtype dtype, int ndim, const int64_t *shape, int64_t *numel,
                   size_t *nbytes)
{
    const int64_t limit = (int64_t)1 << 62;
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0)
            return -1;
        if (shape[i] != 0 && n > limit / shape[i])
            return -1;
        n *= shape[i];
    }
    if (n > limit / (int64_t)st_dtypes[dtype].size)
        return -1;
    *numel = n;
    *nbytes = (size_t)n * st_dtypes[dtype].size;
    return 0;
}
