/* safetensors.h — read and write .safetensors files (checkpoints, --init weights).
 *
 * Format: 8-byte little-endian header length N, N bytes of JSON
 *   {"__metadata__": {"key": "value", ...},
 *    "name": {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}, ...}
 * then the raw little-endian tensor bytes, offsets relative to the end of the header.
 * Supported dtypes: F32, F16, BF16, I64, I32, U8.
 *
 * The reader loads the whole file and validates it as strictly as the reference (Rust)
 * implementation: valid UTF-8 JSON, known dtypes, offsets that tile the data section
 * exactly, in order, with sizes matching dtype x shape.  The writer produces the same bytes
 * as the reference (tensors ordered by dtype alignment, largest first, then by name;
 * metadata first with keys sorted; compact JSON; header padded with spaces to a multiple
 * of 8) and saves atomically. */
#ifndef DDPPROF_SAFETENSORS_H
#define DDPPROF_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ST_MAX_DIMS 8

enum st_dtype { ST_F32, ST_F16, ST_BF16, ST_I64, ST_I32, ST_U8 };

struct st_tensor {
    const char *name;
    enum st_dtype dtype;
    int ndim;                    /* 0 (scalar) .. ST_MAX_DIMS */
    int64_t shape[ST_MAX_DIMS];  /* shape[0..ndim) */
    int64_t numel;               /* product of shape (1 for a scalar) */
    const void *data;            /* nbytes of little-endian elements, aligned to the
                                    element size */
    size_t nbytes;
};

struct st_file;
struct st_writer;

/* bytes per element of dtype */
size_t st_dtype_size(enum st_dtype dtype);

/* "F32", "F16", ... as written in the header */
const char *st_dtype_name(enum st_dtype dtype);

/* Read and validate the whole file.  Returns a handle owning every tensor's name and data
 * (free with st_close), or NULL with one error_set line naming the file and the tensor or
 * byte offset at fault: missing/unreadable file, header length larger than the file, bad
 * JSON, unknown dtype, offsets out of range, overlapping, leaving gaps, or inconsistent
 * with dtype x shape. */
struct st_file *st_open(const char *path);

/* st_open on a file held in memory, buf[0..len) (copied: the caller keeps buf); name is
 * what messages call it.  The fuzz target's entry point. */
struct st_file *st_parse(const void *buf, size_t len, const char *name);

/* Free everything st_open allocated; NULL is a no-op.  Tensor pointers die with it. */
void st_close(struct st_file *st);

/* number of tensors, and the i-th in file (data offset) order, 0 <= i < st_count */
int st_count(const struct st_file *st);
const struct st_tensor *st_get(const struct st_file *st, int i);

/* The tensor called name, or NULL (with error_set naming the file and tensor) if absent.
 * Owned by st. */
const struct st_tensor *st_find(const struct st_file *st, const char *name);

/* The __metadata__ value for key, or NULL if absent.  Owned by st. */
const char *st_metadata_get(const struct st_file *st, const char *key);

/* Copy tensor name into out (numel floats, caller-owned) after checking that its shape is
 * exactly shape[0..ndim); F32 is copied, F16 and BF16 are widened exactly.  Returns 0, or
 * -1 with error_set naming the file and tensor: absent, integer dtype, or a different
 * shape (expected and found). */
int st_read_f32(const struct st_file *st, const char *name, int ndim, const int64_t *shape,
                float *out);

/* An empty writer (free with st_writer_free), or NULL with error_set if out of memory. */
struct st_writer *st_writer_create(void);

/* Add tensor name with dtype and shape[0..ndim).  The data (numel x element size bytes) is
 * COPIED: the caller may free or reuse it right away.  Returns 0, or -1 with error_set for
 * a duplicate or empty or non-UTF-8 name, the reserved name "__metadata__", ndim outside
 * 0..ST_MAX_DIMS, a negative dimension, or no memory. */
int st_writer_add(struct st_writer *w, const char *name, enum st_dtype dtype, int ndim,
                  const int64_t *shape, const void *data);

/* Set __metadata__[key] = value (both copied; a repeated key replaces the value).
 * Returns 0, or -1 with error_set for non-UTF-8 text or no memory. */
int st_writer_metadata(struct st_writer *w, const char *key, const char *value);

/* Write everything added so far to path, atomically: a temp file in the same directory is
 * written, flushed, fsync'ed and renamed over path, then the directory is fsync'ed.  On any
 * failure before the rename, path is untouched and the temp file removed.  Returns 0, or
 * -1 with error_set naming path and the failing step.  The writer stays usable. */
int st_writer_save(struct st_writer *w, const char *path);

/* Free the writer and its copies; NULL is a no-op. */
void st_writer_free(struct st_writer *w);

#ifdef __cplusplus
}
#endif
#endif
