/* ptjson.c — the PyTorch profiler JSON event stream (see ptjson.h): yajl's callbacks drive a
 * small state machine with one context per nesting level (the top object, traceEvents,
 * an event, its args, "Input Dims", distributedInfo, or something skipped); an event's
 * fields land in one struct pt_event that is handed over when the event's map closes.
 * Nothing is allocated per event.
 *
 * yajl re-lexes a token cut by the end of a chunk from its start on every later chunk, so a
 * token spread over k chunks costs k times its length (a 256 MiB number took 153 s in 1 MiB
 * chunks).  ptjson_feed therefore never hands yajl a chunk that ends inside a string, number
 * or literal: it finds where the last token of the chunk starts (strings are skipped with
 * memchr, an escaped quote told by the backslashes before it), holds that tail back and
 * passes the token on whole once its end has come: every byte is lexed once, and a token is
 * held at most once, up to PTJSON_TOKEN_MAX bytes. */
#include "report/input/ptjson.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yajl/yajl_parse.h>

#include "common/error.h"

#define PT_MAX_DEPTH 64

/* What a nesting level is. */
enum pt_ctx {
    CT_SKIP,     /* ignored, with everything inside */
    CT_TOP,      /* the top-level object of a Kineto trace */
    CT_EVENTS,   /* traceEvents, or the legacy top-level array */
    CT_EVENT,    /* one event */
    CT_ARGS,     /* its args */
    CT_DIMS,     /* args "Input Dims": one array per input */
    CT_DIMS_IN,  /* one input's sizes */
    CT_DIST,     /* distributedInfo */
    CT_DEVPROPS  /* deviceProperties */
};

/* The keys that matter, per context (K_NONE: any other key: its value is skipped). */
enum pt_key {
    K_NONE,
    /* top level */
    K_TRACE_EVENTS, K_DIST_INFO, K_BASE_TIME, K_SCHEMA, K_DEVPROPS,
    /* event */
    K_PH, K_CAT, K_NAME, K_PID, K_TID, K_TS, K_DUR, K_ARGS,
    /* args */
    K_EXTERNAL_ID, K_CORRELATION, K_STREAM, K_COLL_NAME, K_IN_NELEMS, K_OUT_NELEMS, K_DTYPE,
    K_INPUT_DIMS, K_ARG_NAME,
    /* distributedInfo */
    K_RANK, K_WORLD_SIZE, K_BACKEND
};

struct ptjson {
    yajl_handle h;
    int bom;            /* bytes of a UTF-8 byte order mark matched at the start; 3: done,
                           -1: no mark */
    char *name;         /* the current event's name (ev.name), NUL-terminated */
    size_t name_cap;
    unsigned char *tok; /* a token held back: it started in an earlier chunk and has not ended */
    size_t tok_len, tok_cap;
    const char *what;
    pt_event_fn fn;
    void *ctx;
    int depth;                          /* open containers */
    unsigned char cx[PT_MAX_DEPTH + 1]; /* enum pt_ctx of each level (1-based) */
    unsigned char key[PT_MAX_DEPTH + 1]; /* enum pt_key pending at each map level */
    int seen_top;   /* a top-level value started */
    int top_scalar; /* the top-level value was not an object or array */
    int dims_n;     /* sizes seen in the current CT_DIMS_IN */
    int64_t dims_first;
    struct pt_header hdr;
    struct pt_event ev;
    uint64_t bytes, events;
    int failed; /* a callback failed (error_set called) */
};

/* ---- numbers ---- */

static int pt_strtod(const char *s, size_t len, double *out)
{
    char buf[64];
    if (len == 0 || len >= sizeof buf)
        return -1;
    memcpy(buf, s, len);
    buf[len] = '\0';
    char *end;
    double v = strtod(buf, &end);
    if (*end != '\0' || !isfinite(v))
        return -1;
    *out = v;
    return 0;
}

int ptjson_us_to_ns(const char *s, size_t len, int64_t *ns)
{
    size_t i = 0;
    int neg = 0;
    if (i < len && s[i] == '-') {
        neg = 1;
        i++;
    }
    if (memchr(s, 'e', len) || memchr(s, 'E', len)) {
        double v;
        if (pt_strtod(s, len, &v) < 0 || !(fabs(v) * 1000.0 < 9.2e18))
            return -1;
        *ns = llround(v * 1000.0);
        return 0;
    }
    uint64_t ip = 0;
    size_t digits = 0;
    for (; i < len && s[i] >= '0' && s[i] <= '9'; i++, digits++) {
        if (ip > (uint64_t)INT64_MAX / 10000)
            return -1;
        ip = ip * 10 + (uint64_t)(s[i] - '0');
    }
    uint64_t frac = 0;
    int nfrac = 0, round_up = 0;
    if (i < len && s[i] == '.') {
        i++;
        size_t fd = 0;
        for (; i < len && s[i] >= '0' && s[i] <= '9'; i++, fd++) {
            if (nfrac < 3) {
                frac = frac * 10 + (uint64_t)(s[i] - '0');
                nfrac++;
            } else if (fd == 3) {
                round_up = s[i] >= '5';
            }
        }
        if (fd == 0)
            return -1;
    }
    if (i != len || digits == 0)
        return -1;
    while (nfrac < 3) {
        frac *= 10;
        nfrac++;
    }
    uint64_t v = ip * 1000 + frac + (uint64_t)round_up;
    if (v > (uint64_t)INT64_MAX)
        return -1;
    *ns = neg ? -(int64_t)v : (int64_t)v;
    return 0;
}

/* An integer field: digits, or a number with an integral value ("3.0", "1e3"). */
static int pt_parse_i64(const char *s, size_t len, int64_t *out)
{
    size_t i = 0;
    int neg = 0;
    if (i < len && s[i] == '-') {
        neg = 1;
        i++;
    }
    uint64_t v = 0;
    size_t start = i;
    for (; i < len && s[i] >= '0' && s[i] <= '9'; i++) {
        if (v > (uint64_t)INT64_MAX / 10)
            return -1;
        v = v * 10 + (uint64_t)(s[i] - '0');
    }
    if (i == len && i > start && v <= (uint64_t)INT64_MAX) {
        *out = neg ? -(int64_t)v : (int64_t)v;
        return 0;
    }
    double d;
    if (pt_strtod(s, len, &d) < 0 || d != floor(d) || !(fabs(d) < 9.2e18))
        return -1;
    *out = (int64_t)d;
    return 0;
}

/* A string pid/tid ("CPU functions", "Spans"): a stable negative id. */
static int64_t pt_string_id(const unsigned char *s, size_t len)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < len; i++)
        h = (h ^ s[i]) * 1099511628211ull;
    return -(int64_t)(h >> 2) - 1;
}

static void pt_copy(char *dst, size_t cap, const unsigned char *s, size_t len)
{
    size_t n = len < cap - 1 ? len : cap - 1;
    memcpy(dst, s, n);
    dst[n] = '\0';
}

/* ---- keys ---- */

#define KEY_IS(lit) (len == sizeof(lit) - 1 && memcmp(k, lit, sizeof(lit) - 1) == 0)

static enum pt_key pt_key_of(enum pt_ctx cx, const unsigned char *k, size_t len)
{
    switch (cx) {
    case CT_EVENT:
        if (len == 2)
            return KEY_IS("ph") ? K_PH : KEY_IS("ts") ? K_TS : K_NONE;
        if (len == 3)
            return KEY_IS("cat") ? K_CAT : KEY_IS("pid") ? K_PID : KEY_IS("tid") ? K_TID
                                         : KEY_IS("dur") ? K_DUR : K_NONE;
        if (len == 4)
            return KEY_IS("name") ? K_NAME : KEY_IS("args") ? K_ARGS : K_NONE;
        return K_NONE;
    case CT_ARGS:
        if (KEY_IS("External id"))
            return K_EXTERNAL_ID;
        if (KEY_IS("correlation"))
            return K_CORRELATION;
        if (KEY_IS("stream"))
            return K_STREAM;
        if (KEY_IS("Collective name"))
            return K_COLL_NAME;
        if (KEY_IS("In msg nelems"))
            return K_IN_NELEMS;
        if (KEY_IS("Out msg nelems"))
            return K_OUT_NELEMS;
        if (KEY_IS("dtype"))
            return K_DTYPE;
        if (KEY_IS("Input Dims"))
            return K_INPUT_DIMS;
        if (KEY_IS("name"))
            return K_ARG_NAME;
        return K_NONE;
    case CT_TOP:
        if (KEY_IS("traceEvents"))
            return K_TRACE_EVENTS;
        if (KEY_IS("distributedInfo"))
            return K_DIST_INFO;
        if (KEY_IS("baseTimeNanoseconds"))
            return K_BASE_TIME;
        if (KEY_IS("schemaVersion"))
            return K_SCHEMA;
        if (KEY_IS("deviceProperties"))
            return K_DEVPROPS;
        return K_NONE;
    case CT_DIST:
        if (KEY_IS("rank"))
            return K_RANK;
        if (KEY_IS("world_size"))
            return K_WORLD_SIZE;
        if (KEY_IS("backend"))
            return K_BACKEND;
        return K_NONE;
    default:
        return K_NONE;
    }
}

static enum pt_cat pt_cat_of(const unsigned char *k, size_t len)
{
    if (KEY_IS("cpu_op"))
        return PT_CAT_CPU_OP;
    if (KEY_IS("kernel") || KEY_IS("Kernel"))
        return PT_CAT_KERNEL;
    if (KEY_IS("cuda_runtime"))
        return PT_CAT_CUDA_RUNTIME;
    if (KEY_IS("user_annotation"))
        return PT_CAT_USER_ANNOTATION;
    if (KEY_IS("gpu_user_annotation"))
        return PT_CAT_GPU_USER_ANNOTATION;
    if (KEY_IS("cuda_driver"))
        return PT_CAT_CUDA_DRIVER;
    if (KEY_IS("gpu_memcpy") || KEY_IS("Memcpy"))
        return PT_CAT_GPU_MEMCPY;
    if (KEY_IS("gpu_memset") || KEY_IS("Memset"))
        return PT_CAT_GPU_MEMSET;
    if (KEY_IS("python_function"))
        return PT_CAT_PYTHON_FUNCTION;
    return PT_CAT_OTHER;
}

#undef KEY_IS

/* ---- yajl callbacks ---- */

/* The context and key a value at the current level belongs to. */
static enum pt_ctx pt_cx(const struct ptjson *p)
{
    return p->depth > 0 ? (enum pt_ctx)p->cx[p->depth] : CT_SKIP;
}

static enum pt_key pt_pending(const struct ptjson *p)
{
    return p->depth > 0 ? (enum pt_key)p->key[p->depth] : K_NONE;
}

/* A scalar at the top level: not a trace. */
static int pt_top_scalar(struct ptjson *p)
{
    if (p->depth == 0) {
        p->top_scalar = 1;
        p->seen_top = 1;
        return 0; /* stop: ptjson_feed reports it */
    }
    return 1;
}

static int pt_number(void *vp, const char *s, size_t len)
{
    struct ptjson *p = vp;
    if (!pt_top_scalar(p))
        return 0;
    enum pt_ctx cx = pt_cx(p);
    int64_t v;
    struct pt_event *e = &p->ev;
    if (cx == CT_EVENT) {
        switch (pt_pending(p)) {
        case K_TS:
            e->has_ts = ptjson_us_to_ns(s, len, &e->ts_ns) == 0;
            break;
        case K_DUR:
            e->has_dur = ptjson_us_to_ns(s, len, &e->dur_ns) == 0 && e->dur_ns >= 0;
            e->bad_dur = !e->has_dur;
            break;
        case K_PID:
            if (pt_parse_i64(s, len, &v) == 0)
                e->pid = v;
            break;
        case K_TID:
            if (pt_parse_i64(s, len, &v) == 0) {
                e->tid = v;
                e->has_tid = 1;
            }
            break;
        default:
            break;
        }
    } else if (cx == CT_ARGS) {
        switch (pt_pending(p)) {
        case K_EXTERNAL_ID:
            e->has_ext = pt_parse_i64(s, len, &e->external_id) == 0;
            break;
        case K_CORRELATION:
            e->has_corr = pt_parse_i64(s, len, &e->correlation) == 0;
            break;
        case K_STREAM:
            e->has_stream = pt_parse_i64(s, len, &e->stream) == 0;
            break;
        case K_IN_NELEMS:
            e->has_nelems = pt_parse_i64(s, len, &e->in_nelems) == 0 && e->in_nelems >= 0;
            break;
        case K_OUT_NELEMS:
            e->has_out_nelems = pt_parse_i64(s, len, &e->out_nelems) == 0 && e->out_nelems >= 0;
            break;
        default:
            break;
        }
    } else if (cx == CT_DIMS_IN) {
        if (p->dims_n++ == 0 && pt_parse_i64(s, len, &v) == 0)
            p->dims_first = v;
    } else if (cx == CT_TOP) {
        if (pt_pending(p) == K_BASE_TIME && pt_parse_i64(s, len, &v) == 0) {
            p->hdr.base_ns = v;
            p->hdr.has_base = 1;
        } else if (pt_pending(p) == K_SCHEMA && pt_parse_i64(s, len, &v) == 0) {
            p->hdr.schema_version = v;
            p->hdr.has_schema = 1;
        }
    } else if (cx == CT_DIST) {
        if (pt_pending(p) == K_RANK && pt_parse_i64(s, len, &v) == 0) {
            p->hdr.rank = v;
            p->hdr.has_rank = 1;
        } else if (pt_pending(p) == K_WORLD_SIZE && pt_parse_i64(s, len, &v) == 0) {
            p->hdr.world_size = v;
            p->hdr.has_world = 1;
        }
    }
    return 1;
}

static int pt_string(void *vp, const unsigned char *s, size_t len)
{
    struct ptjson *p = vp;
    if (!pt_top_scalar(p))
        return 0;
    enum pt_ctx cx = pt_cx(p);
    struct pt_event *e = &p->ev;
    int64_t v;
    if (cx == CT_EVENT) {
        switch (pt_pending(p)) {
        case K_NAME:
            if (len + 1 > p->name_cap) {
                size_t cap = p->name_cap ? p->name_cap : 256;
                while (cap < len + 1)
                    cap *= 2;
                char *n = realloc(p->name, cap);
                if (!n) {
                    p->failed = 1;
                    error_set("%s: out of memory for a %zu-byte event name at byte %llu",
                              p->what, len, (unsigned long long)p->bytes);
                    return 0;
                }
                p->name = n;
                p->name_cap = cap;
            }
            memcpy(p->name, s, len);
            p->name[len] = '\0';
            e->name = p->name;
            e->name_len = len;
            break;
        case K_PH:
            e->ph = len > 0 ? (char)s[0] : 0;
            break;
        case K_CAT:
            e->cat = pt_cat_of(s, len);
            break;
        case K_PID:
            e->pid = pt_string_id(s, len);
            break;
        case K_TID:
            e->tid = pt_string_id(s, len);
            e->has_tid = 1;
            break;
        default:
            break;
        }
    } else if (cx == CT_ARGS) {
        switch (pt_pending(p)) {
        case K_COLL_NAME:
            pt_copy(e->coll, sizeof e->coll, s, len);
            break;
        case K_DTYPE:
            pt_copy(e->dtype, sizeof e->dtype, s, len);
            break;
        case K_ARG_NAME:
            pt_copy(e->meta, sizeof e->meta, s, len);
            break;
        case K_IN_NELEMS: /* written as a string by some exporters */
            e->has_nelems = pt_parse_i64((const char *)s, len, &e->in_nelems) == 0 &&
                            e->in_nelems >= 0;
            break;
        case K_OUT_NELEMS:
            e->has_out_nelems = pt_parse_i64((const char *)s, len, &e->out_nelems) == 0 &&
                                e->out_nelems >= 0;
            break;
        default:
            break;
        }
    } else if (cx == CT_DIST) {
        if (pt_pending(p) == K_BACKEND) {
            pt_copy(p->hdr.backend, sizeof p->hdr.backend, s, len);
            p->hdr.has_backend = 1;
        } else if (pt_pending(p) == K_RANK && pt_parse_i64((const char *)s, len, &v) == 0) {
            p->hdr.rank = v;
            p->hdr.has_rank = 1;
        } else if (pt_pending(p) == K_WORLD_SIZE &&
                   pt_parse_i64((const char *)s, len, &v) == 0) {
            p->hdr.world_size = v;
            p->hdr.has_world = 1;
        }
    } else if (cx == CT_DIMS_IN) {
        p->dims_n++;
    }
    return 1;
}

static int pt_null(void *vp)
{
    struct ptjson *p = vp;
    if (!pt_top_scalar(p))
        return 0;
    if (pt_cx(p) == CT_DIMS_IN)
        p->dims_n++;
    return 1;
}

static int pt_boolean(void *vp, int b)
{
    (void)b;
    return pt_null(vp);
}

static int pt_map_key(void *vp, const unsigned char *k, size_t len)
{
    struct ptjson *p = vp;
    p->key[p->depth] = (unsigned char)pt_key_of(pt_cx(p), k, len);
    return 1;
}

/* Open a container: decide what it is from its parent and the pending key. */
static int pt_open(struct ptjson *p, int is_map)
{
    if (p->depth >= PT_MAX_DEPTH) {
        p->failed = 1;
        error_set("%s: JSON nested deeper than %d levels at byte %llu: not a profiler trace",
                  p->what, PT_MAX_DEPTH, (unsigned long long)p->bytes);
        return 0;
    }
    enum pt_ctx parent = pt_cx(p), cx = CT_SKIP;
    enum pt_key k = pt_pending(p);
    if (p->depth == 0) {
        p->seen_top = 1;
        if (is_map) {
            cx = CT_TOP;
            p->hdr.format = PT_FORMAT_KINETO;
        } else {
            cx = CT_EVENTS;
            p->hdr.format = PT_FORMAT_LEGACY;
        }
    } else {
        switch (parent) {
        case CT_TOP:
            cx = k == K_TRACE_EVENTS && !is_map ? CT_EVENTS
                 : k == K_DIST_INFO && is_map   ? CT_DIST
                 : k == K_DEVPROPS && !is_map   ? CT_DEVPROPS
                                                : CT_SKIP;
            break;
        case CT_EVENTS:
            if (is_map) {
                cx = CT_EVENT;
                memset(&p->ev, 0, sizeof p->ev);
                p->ev.name = "";
            }
            break;
        case CT_EVENT:
            cx = k == K_ARGS && is_map ? CT_ARGS : CT_SKIP;
            break;
        case CT_ARGS:
            cx = k == K_INPUT_DIMS && !is_map ? CT_DIMS : CT_SKIP;
            break;
        case CT_DIMS:
            if (!is_map) {
                cx = CT_DIMS_IN;
                p->dims_n = 0;
                p->dims_first = -1;
            }
            break;
        case CT_DEVPROPS:
            p->hdr.devices += is_map;
            break;
        default:
            break;
        }
    }
    p->depth++;
    p->cx[p->depth] = (unsigned char)cx;
    p->key[p->depth] = K_NONE;
    return 1;
}

static int pt_close(struct ptjson *p)
{
    enum pt_ctx cx = pt_cx(p);
    if (cx == CT_DIMS_IN) {
        struct pt_event *e = &p->ev;
        if (!e->has_dims0 && p->dims_n >= 2 && p->dims_first >= 0) {
            e->dims0 = p->dims_first;
            e->has_dims0 = 1;
        }
    }
    p->depth--;
    if (cx == CT_EVENT) {
        p->events++;
        if (p->ev.bad_dur && p->ev.ph == 'X') { /* not a zero-length range: counted, left out */
            p->hdr.bad_durs++;
            return 1;
        }
        if (p->fn(p->ctx, &p->ev) < 0) {
            p->failed = 1;
            return 0;
        }
    }
    return 1;
}

static int pt_start_map(void *vp)
{
    return pt_open(vp, 1);
}

static int pt_start_array(void *vp)
{
    return pt_open(vp, 0);
}

static int pt_end(void *vp)
{
    return pt_close(vp);
}

static const yajl_callbacks pt_callbacks = {
    .yajl_null = pt_null,
    .yajl_boolean = pt_boolean,
    .yajl_number = pt_number, /* integers and doubles come as text: parsed exactly here */
    .yajl_string = pt_string,
    .yajl_start_map = pt_start_map,
    .yajl_map_key = pt_map_key,
    .yajl_end_map = pt_end,
    .yajl_start_array = pt_start_array,
    .yajl_end_array = pt_end,
};

/* ---- the public face ---- */

struct ptjson *ptjson_new(const char *what, pt_event_fn fn, void *ctx)
{
    struct ptjson *p = calloc(1, sizeof *p);
    if (!p) {
        error_set("%s: out of memory for the JSON parser", what);
        return NULL;
    }
    p->what = what;
    p->fn = fn;
    p->ctx = ctx;
    p->h = yajl_alloc(&pt_callbacks, NULL, p);
    if (!p->h) {
        free(p);
        error_set("%s: out of memory for the JSON parser", what);
        return NULL;
    }
    /* The exporters write bytes as they come (Kineto replaces non-printable names, the
     * legacy exporter does not escape at all): strings are not UTF-8-checked here; the
     * report's JSON writer replaces invalid bytes with '?'. */
    yajl_config(p->h, yajl_dont_validate_strings, 1);
    return p;
}

void ptjson_free(struct ptjson *p)
{
    if (!p)
        return;
    yajl_free(p->h);
    free(p->tok);
    free(p->name);
    free(p);
}

/* The one-line error of a failed yajl call ("not valid JSON at byte N: ..."). */
static int pt_yajl_error(struct ptjson *p, const unsigned char *buf, size_t len)
{
    if (p->failed)
        return -1;
    uint64_t at = p->bytes + yajl_get_bytes_consumed(p->h);
    if (p->top_scalar)
        return error_set("%s: not a PyTorch profiler trace: the JSON holds a single value, not "
                         "an object (Kineto) or an array (legacy exporter)",
                         p->what);
    unsigned char *msg = yajl_get_error(p->h, 0, buf, len);
    char text[160] = "";
    if (msg) {
        snprintf(text, sizeof text, "%s", (const char *)msg);
        for (char *c = text; *c; c++)
            if (*c == '\n' || *c == '\r')
                *c = ' ';
        size_t n = strlen(text);
        while (n > 0 && text[n - 1] == ' ')
            text[--n] = '\0';
        yajl_free_error(p->h, msg);
    }
    return error_set("%s: not valid JSON at byte %llu (%s): is it a PyTorch profiler trace?",
                     p->what, (unsigned long long)at, text);
}

/* Hand buf[0..len) to yajl.  Returns 0 or -1 after error_set(). */
static int pt_yajl(struct ptjson *p, const unsigned char *buf, size_t len)
{
    if (len == 0)
        return 0;
    if (yajl_parse(p->h, buf, len) != yajl_status_ok)
        return pt_yajl_error(p, buf, len);
    p->bytes += len;
    return 0;
}

/* Can byte c be inside a number or a literal (true, false, null)? */
static int pt_bare(unsigned char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           c == '.' || c == '+' || c == '-';
}

/* The backslashes right before s[i] (continuing into the held token's bytes when they reach
 * s's start).  A run of them is counted once per quote after it: linear overall. */
static size_t pt_backslashes(const struct ptjson *p, const unsigned char *s, size_t i)
{
    size_t n = 0;
    while (i > 0 && s[i - 1] == '\\') {
        n++;
        i--;
    }
    if (i == 0)
        for (size_t k = p->tok_len; k > 1 && p->tok[k - 1] == '\\'; k--)
            n++;
    return n;
}

/* The end of a string whose content goes on at s[from..len): the index after its closing
 * quote, or 0 when it does not end in s. */
static size_t pt_string_end(const struct ptjson *p, const unsigned char *s, size_t from,
                            size_t len)
{
    for (size_t i = from; i < len;) {
        const unsigned char *q = memchr(s + i, '"', len - i);
        if (!q)
            return 0;
        size_t at = (size_t)(q - s);
        if (pt_backslashes(p, s, at) % 2 == 0)
            return at + 1;
        i = at + 1;
    }
    return 0;
}

/* Hold s[0..n) back, after what is held already.  Returns 0, or -1 after error_set() when
 * the token would pass PTJSON_TOKEN_MAX (or no memory). */
static int pt_hold(struct ptjson *p, const unsigned char *s, size_t n)
{
    if (p->tok_len + n > PTJSON_TOKEN_MAX + 2) /* + 2: a string's quotes */
        return error_set("%s: a JSON %s longer than %d MiB at byte %llu: no profiler trace "
                         "holds one (a damaged or hostile file); not read further",
                         p->what, (p->tok_len ? p->tok[0] : s[0]) == '"' ? "string" : "number",
                         PTJSON_TOKEN_MAX >> 20, (unsigned long long)p->bytes);
    if (p->tok_len + n > p->tok_cap) {
        size_t cap = p->tok_cap ? p->tok_cap : 4096;
        while (cap < p->tok_len + n)
            cap *= 2;
        unsigned char *t = realloc(p->tok, cap);
        if (!t)
            return error_set("%s: out of memory holding a %zu-byte JSON token at byte %llu",
                             p->what, p->tok_len + n, (unsigned long long)p->bytes);
        p->tok = t;
        p->tok_cap = cap;
    }
    memcpy(p->tok + p->tok_len, s, n);
    p->tok_len += n;
    return 0;
}

int ptjson_feed(struct ptjson *p, const void *data, size_t len)
{
    const unsigned char *buf = data;
    size_t pos = 0;
    /* a UTF-8 byte order mark before the JSON (an editor on Windows writes one; JSON's RFC
     * lets a parser ignore it): skipped, counted in the byte offsets */
    static const unsigned char bom[3] = {0xEF, 0xBB, 0xBF};
    while (p->bom >= 0 && p->bom < 3 && pos < len) {
        if (buf[pos] == bom[p->bom]) {
            p->bom++;
            pos++;
            continue;
        }
        const int matched = p->bom;
        p->bom = -1; /* not a mark: what matched of it is JSON (not valid JSON) */
        if (matched && pt_yajl(p, bom, (size_t)matched) < 0)
            return -1;
    }
    if (p->bom == 3) {
        p->bytes += 3;
        p->bom = -2; /* counted */
    }
    buf += pos;
    len -= pos;
    pos = 0;
    if (p->tok_len > 0) { /* the held token: does it end in this chunk? */
        size_t end = 0;
        int ends;
        if (p->tok[0] == '"') {
            end = pt_string_end(p, buf, 0, len);
            ends = end > 0;
        } else {
            while (end < len && pt_bare(buf[end]))
                end++;
            ends = end < len;
        }
        if (!ends)
            return pt_hold(p, buf, len);
        if (pt_hold(p, buf, end) < 0)
            return -1;
        size_t n = p->tok_len;
        p->tok_len = 0; /* pt_yajl's error message may count on it */
        if (pt_yajl(p, p->tok, n) < 0)
            return -1;
        if (p->tok_cap > (1u << 20)) { /* a long token's room is not kept for the rest */
            free(p->tok);
            p->tok = NULL;
            p->tok_cap = 0;
        }
        pos = end;
    }
    /* where the chunk's last token starts, when it may go on in the next chunk */
    size_t hold = len;
    for (size_t i = pos; i < len;) {
        const unsigned char *q = memchr(buf + i, '"', len - i);
        if (!q) { /* no string left: a number or literal at the very end may go on */
            size_t k = len;
            while (k > i && pt_bare(buf[k - 1]))
                k--;
            hold = k;
            break;
        }
        size_t open = (size_t)(q - buf), end = pt_string_end(p, buf, open + 1, len);
        if (end == 0) {
            hold = open;
            break;
        }
        i = end;
    }
    if (pt_yajl(p, buf + pos, hold - pos) < 0)
        return -1;
    return hold < len ? pt_hold(p, buf + hold, len - hold) : 0;
}

int ptjson_finish(struct ptjson *p)
{
    if (p->tok_len > 0) { /* the input ends inside it (a number ends there; a string is cut) */
        size_t n = p->tok_len;
        p->tok_len = 0;
        if (pt_yajl(p, p->tok, n) < 0)
            return -1;
    }
    if (yajl_complete_parse(p->h) == yajl_status_ok)
        return p->seen_top ? 0 : error_set("%s: empty file: no JSON in it", p->what);
    if (p->failed || p->top_scalar)
        return pt_yajl_error(p, NULL, 0);
    if (!p->seen_top)
        return error_set("%s: empty file: no JSON in it", p->what);
    return 1; /* cut short: the events before the cut were delivered */
}

const struct pt_header *ptjson_header(const struct ptjson *p)
{
    return &p->hdr;
}

uint64_t ptjson_bytes(const struct ptjson *p)
{
    return p->bytes;
}

uint64_t ptjson_events(const struct ptjson *p)
{
    return p->events;
}

int ptjson_parse_buffer(const char *buf, size_t len, const char *what, pt_event_fn fn,
                        void *ctx, struct pt_header *hdr)
{
    struct ptjson *p = ptjson_new(what, fn, ctx);
    if (!p)
        return -1;
    int rc = ptjson_feed(p, buf, len);
    if (rc == 0)
        rc = ptjson_finish(p);
    if (hdr)
        *hdr = p->hdr;
    ptjson_free(p);
    return rc;
}

