/* ptjson.h — PyTorch profiler traces read as a stream of events: Kineto JSON (an object with
 * schemaVersion, distributedInfo, baseTimeNanoseconds, traceEvents, ...) and the legacy
 * autograd exporter's bare array of events.  The bytes go through yajl (Debian's
 * libyajl2, a streaming parser); every complete trace event is handed to a callback with
 * the fields the report uses (ph, cat, name, pid, tid, ts, dur and a few args) and the
 * rest is skipped as it is parsed, so memory does not grow with the file.
 *
 * Kept from an event: ts and dur (µs in the file, with decimals) as integer nanoseconds
 * rounded to the nearest; the args "External id", "correlation", "stream", "Collective
 * name", "In msg nelems", "Out msg nelems", "dtype", "Input Dims" (only the first size of
 * the first input with at least two dimensions) and, for metadata events, "name".  A field
 * of the wrong JSON type counts as absent; the name is kept whole.  Nothing here knows what the events mean: that is
 * report/input/import_pytorch.c (with report/input/pytorch_names.c) and the import core. */
#ifndef DDPPROF_REPORT_PTJSON_H
#define DDPPROF_REPORT_PTJSON_H

#include <stddef.h>
#include <stdint.h>

#include "probes/trace_format.h"

/* The `cat` of an event (Kineto's categories; legacy events have none). */
enum pt_cat {
    PT_CAT_NONE, /* no cat: the legacy exporter */
    PT_CAT_CPU_OP,
    PT_CAT_USER_ANNOTATION,
    PT_CAT_PYTHON_FUNCTION,
    PT_CAT_GPU_USER_ANNOTATION,
    PT_CAT_CUDA_RUNTIME,
    PT_CAT_CUDA_DRIVER,
    PT_CAT_KERNEL,
    PT_CAT_GPU_MEMCPY,
    PT_CAT_GPU_MEMSET,
    PT_CAT_OTHER
};

enum pt_format {
    PT_FORMAT_UNKNOWN, /* nothing read yet */
    PT_FORMAT_KINETO,  /* a JSON object (with traceEvents) */
    PT_FORMAT_LEGACY   /* a bare JSON array of events */
};

/* One trace event; the has_ flags say which fields were present with the right type. */
struct pt_event {
    char ph; /* 'X', 'M', 'i', 's', 'f', ...; 0 when absent */
    enum pt_cat cat;
    unsigned has_ts : 1, has_dur : 1, has_tid : 1, has_corr : 1, has_ext : 1, has_stream : 1,
        has_nelems : 1, has_out_nelems : 1, has_dims0 : 1,
        bad_dur : 1; /* a dur that is no duration: negative, not a number, beyond int64 ns */
    int64_t ts_ns, dur_ns;
    int64_t pid, tid;   /* numbers as written; a string is hashed into a negative id */
    int64_t correlation, external_id, stream;
    int64_t in_nelems;  /* args "In msg nelems" */
    int64_t out_nelems; /* args "Out msg nelems" (an all-gather's: world x in) */
    int64_t dims0;      /* args "Input Dims": first size of the first input with >= 2 dims */
    char coll[32];      /* args "Collective name" (cut to fit) */
    char dtype[32];     /* args "dtype" */
    char meta[128];     /* args "name" (process_name, thread_name metadata events) */
    size_t name_len;
    const char *name; /* whole (no cap but PTJSON_TOKEN_MAX: a templated kernel's name can
                         run to several KiB, and tools compare them whole), NUL-terminated;
                         owned by the parser, valid during the callback */
};

/* The top-level fields of a Kineto trace (they may come before or after traceEvents). */
struct pt_header {
    enum pt_format format;
    unsigned has_schema : 1, has_rank : 1, has_world : 1, has_base : 1, has_backend : 1;
    int64_t schema_version, rank, world_size, base_ns;
    char backend[32];  /* distributedInfo.backend */
    int devices;       /* entries of deviceProperties */
    uint64_t bad_durs; /* complete ('X') events whose dur is no duration: not reported */
};

/* Called for every complete event of traceEvents (or of the legacy array).  Returns 0, or
 * -1 after error_set() to stop the parse. */
typedef int (*pt_event_fn)(void *ctx, const struct pt_event *ev);

struct ptjson; /* the parser state (ptjson.c) */

/* A new parser reporting to fn(ctx, ...); what names the input in messages (a path).
 * NULL after error_set() (out of memory).  Free with ptjson_free. */
struct ptjson *ptjson_new(const char *what, pt_event_fn fn, void *ctx);
void ptjson_free(struct ptjson *p);

/* The longest JSON string (its bytes as written, between the quotes) or number the reader
 * takes: a kernel name of a few KiB is the longest any profiler writes; a longer token is a
 * damaged or hostile file, refused where it starts rather than read for minutes (a 4 MB .gz
 * can hold a 4 GiB string).  Each byte of a token is lexed once, so time is linear up to it. */
#define PTJSON_TOKEN_MAX (64 << 20)

/* Parse the next len bytes.  Returns 0, or -1 after error_set() ("WHAT: not valid JSON at
 * byte N: ...", "WHAT: a JSON string longer than 64 MiB at byte N: ..." or the callback's
 * own message).  A token that the chunk ends inside is held (copied) until its end comes. */
int ptjson_feed(struct ptjson *p, const void *buf, size_t len);

/* End of input.  Returns 0 when the document was complete, 1 when it was cut short
 * (a truncated file: the events before the cut were delivered), -1 after error_set() (no
 * JSON at all, or not an object or array at the top). */
int ptjson_finish(struct ptjson *p);

/* The header fields read so far; bytes parsed so far; events delivered. */
const struct pt_header *ptjson_header(const struct ptjson *p);
uint64_t ptjson_bytes(const struct ptjson *p);
uint64_t ptjson_events(const struct ptjson *p);

/* The whole of buf[0..len) (a fuzz target wraps this): ptjson_new, feed, finish, free.
 * *hdr (may be NULL) gets the header.  Returns as ptjson_finish. */
int ptjson_parse_buffer(const char *buf, size_t len, const char *what, pt_event_fn fn,
                        void *ctx, struct pt_header *hdr);

/* Parse a JSON number of microseconds ("1234.5678", "-3", "1.5e3") into nanoseconds,
 * rounded to the nearest.  Returns 0, or -1 when it is not a number or overflows. */
int ptjson_us_to_ns(const char *s, size_t len, int64_t *ns);

#endif
