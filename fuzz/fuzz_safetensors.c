/* fuzz_safetensors.c — the safetensors reader (trainer/io/safetensors_read.c and the JSON
 * reader under it, trainer/io/json.c): header length, header JSON, dtypes, shapes and
 * data offsets, through st_parse on the bytes.
 *
 * An accepted file must be what the reader promises: tensors in data order tiling the data
 * section exactly, each nbytes = numel x dtype size with numel the product of its shape,
 * data aligned to the element size, names unique and findable; every float tensor reads
 * back (st_read_f32) at its own shape. */
#include "fuzz/fuzz_util.h"

#include "io/safetensors.h"

#include <stdlib.h>
#include <string.h>

#define FUZZ_ST_MAX_READ (1 << 22) /* elements read back per input */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct st_file *st = st_parse(data, size, "fuzz.safetensors");
    if (!st) {
        fuzz_status(-1, "st_parse");
        return 0;
    }
    uint64_t header = 0;
    for (int i = 7; i >= 0; i--)
        header = header << 8 | data[i];
    size_t covered = 0;
    size_t read_back = 0;
    for (int i = 0; i < st_count(st); i++) {
        const struct st_tensor *t = st_get(st, i);
        FUZZ_CHECK(t && t->name && t->ndim >= 0 && t->ndim <= ST_MAX_DIMS, "tensor %d", i);
        int64_t numel = 1;
        for (int d = 0; d < t->ndim; d++) {
            FUZZ_CHECK(t->shape[d] >= 0, "%s: dimension %d is %lld", t->name, d,
                       (long long)t->shape[d]);
            numel *= t->shape[d];
        }
        FUZZ_CHECK(numel == t->numel && (size_t)numel * st_dtype_size(t->dtype) == t->nbytes,
                   "%s: numel %lld, nbytes %zu", t->name, (long long)t->numel, t->nbytes);
        FUZZ_CHECK((uintptr_t)t->data % st_dtype_size(t->dtype) == 0, "%s: misaligned",
                   t->name);
        /* the bytes are the file's, in data order */
        FUZZ_CHECK(memcmp(t->data, data + 8 + header + covered, t->nbytes) == 0,
                   "%s: data is not the file's bytes at %zu", t->name, covered);
        covered += t->nbytes;
        FUZZ_CHECK(st_find(st, t->name) == t, "%s: st_find finds another tensor", t->name);
        if ((t->dtype == ST_F32 || t->dtype == ST_F16 || t->dtype == ST_BF16) &&
            read_back + (size_t)t->numel <= FUZZ_ST_MAX_READ) {
            float *out = malloc((size_t)t->numel * sizeof *out + 1);
            FUZZ_CHECK(out, "out of memory");
            FUZZ_CHECK(st_read_f32(st, t->name, t->ndim, t->shape, out) == 0, "%s: read back",
                       t->name);
            read_back += (size_t)t->numel;
            free(out);
        }
    }
    FUZZ_CHECK(8 + header + covered == size, "tensors cover %zu of %zu data bytes", covered,
               (size_t)(size - 8 - header));
    st_metadata_get(st, "format");
    st_close(st);
    return 0;
}
