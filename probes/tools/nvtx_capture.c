/* nvtx_capture.c — the recording NVTX tool, its CSV save/load, and the training check
 * (see nvtx_capture.h). */
#include "probes/tools/nvtx_capture.h"

#include "common/error.h"
#include "common/vec.h"
#include "probes/phase.h"

#include <csv.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

static pthread_mutex_t cap_mu = PTHREAD_MUTEX_INITIALIZER;
static struct nvtx_capture_event *cap_events;
static size_t cap_count, cap_cap;
static int cap_attached;

static void cap_copy(char *dst, const char *src)
{
    size_t n = src ? strnlen(src, NVTX_CAPTURE_NAME_MAX - 1) : 0;
    if (n)
        memcpy(dst, src, n);
    dst[n] = '\0';
}

/* Append one event (filled by the caller through the returned pointer, under cap_mu). */
static struct nvtx_capture_event *cap_append(enum nvtx_capture_op op, const char *domain)
{
    if (VEC_RESERVE(cap_events, cap_cap, cap_count + 1))
        return NULL;
    struct nvtx_capture_event *e = &cap_events[cap_count++];
    memset(e, 0, sizeof *e);
    e->op = op;
    e->tid = (int)syscall(SYS_gettid);
    cap_copy(e->domain, domain);
    return e;
}

int nvtx_capture_attached(void)
{
    return cap_attached;
}

size_t nvtx_capture_events(const struct nvtx_capture_event **events)
{
    *events = cap_events;
    return cap_count;
}

void nvtx_capture_reset(void)
{
    pthread_mutex_lock(&cap_mu);
    cap_count = 0;
    pthread_mutex_unlock(&cap_mu);
}

static const char *const cap_op_names[NVTX_CAPTURE_OP_COUNT] = {
    "domain_create", "domain_destroy", "register_string", "name_category", "push",
    "pop", "start", "end", "mark"};

const char *nvtx_capture_op_name(enum nvtx_capture_op op)
{
    return (unsigned)op < NVTX_CAPTURE_OP_COUNT ? cap_op_names[op] : "?";
}

#ifdef DDPPROF_HAVE_NVTX
#define NVTX_NO_IMPL /* types only: the implementation lives in nvtx.c */
#include <nvtx3/nvToolsExt.h>

/* Handles given to NVTX: pointers into these pools (never freed: a process has few). */
#define CAP_MAX_DOMAINS 64
#define CAP_MAX_STRINGS 8192
struct cap_domain {
    char name[NVTX_CAPTURE_NAME_MAX];
};
struct cap_string {
    char s[NVTX_CAPTURE_NAME_MAX];
};
static struct cap_domain cap_domains[CAP_MAX_DOMAINS];
static int cap_ndomains;
static struct cap_string cap_strings[CAP_MAX_STRINGS];
static int cap_nstrings;
static uint64_t cap_next_range_id = 1;
static __thread int cap_depth;

static const char *cap_domain_name(nvtxDomainHandle_t d)
{
    return d ? ((const struct cap_domain *)(const void *)d)->name : "";
}

static void cap_attributes(struct nvtx_capture_event *e, const nvtxEventAttributes_t *a)
{
    if (!a)
        return;
    switch (a->messageType) {
    case NVTX_MESSAGE_TYPE_ASCII:
        cap_copy(e->name, a->message.ascii);
        break;
    case NVTX_MESSAGE_TYPE_REGISTERED:
        if (a->message.registered)
            cap_copy(e->name, ((const struct cap_string *)(const void *)a->message.registered)->s);
        e->registered = 1;
        break;
    case NVTX_MESSAGE_TYPE_UNICODE:
        cap_copy(e->name, "<unicode>");
        break;
    default:
        break;
    }
    e->category = a->category;
    e->has_color = a->colorType == NVTX_COLOR_ARGB;
    e->color = a->color;
    e->payload_type = a->payloadType;
    e->payload = a->payload.ullValue;
}

static nvtxDomainHandle_t NVTX_API cap_domain_create(const char *name)
{
    pthread_mutex_lock(&cap_mu);
    struct cap_domain *d = cap_ndomains < CAP_MAX_DOMAINS ? &cap_domains[cap_ndomains++] : NULL;
    if (d)
        cap_copy(d->name, name);
    struct nvtx_capture_event *e = cap_append(NVTX_CAPTURE_DOMAIN_CREATE, name);
    if (e)
        cap_copy(e->name, name);
    pthread_mutex_unlock(&cap_mu);
    return (nvtxDomainHandle_t)(void *)d;
}

static void NVTX_API cap_domain_destroy(nvtxDomainHandle_t d)
{
    pthread_mutex_lock(&cap_mu);
    cap_append(NVTX_CAPTURE_DOMAIN_DESTROY, cap_domain_name(d));
    pthread_mutex_unlock(&cap_mu);
}

static nvtxStringHandle_t NVTX_API cap_register_string(nvtxDomainHandle_t d, const char *s)
{
    pthread_mutex_lock(&cap_mu);
    struct cap_string *h = cap_nstrings < CAP_MAX_STRINGS ? &cap_strings[cap_nstrings++] : NULL;
    if (h)
        cap_copy(h->s, s);
    struct nvtx_capture_event *e = cap_append(NVTX_CAPTURE_REGISTER_STRING, cap_domain_name(d));
    if (e)
        cap_copy(e->name, s);
    pthread_mutex_unlock(&cap_mu);
    return (nvtxStringHandle_t)(void *)h;
}

static void NVTX_API cap_name_category(nvtxDomainHandle_t d, uint32_t category, const char *name)
{
    pthread_mutex_lock(&cap_mu);
    struct nvtx_capture_event *e = cap_append(NVTX_CAPTURE_NAME_CATEGORY, cap_domain_name(d));
    if (e) {
        e->category = category;
        cap_copy(e->name, name);
    }
    pthread_mutex_unlock(&cap_mu);
}

static int NVTX_API cap_push(nvtxDomainHandle_t d, const nvtxEventAttributes_t *a)
{
    pthread_mutex_lock(&cap_mu);
    struct nvtx_capture_event *e = cap_append(NVTX_CAPTURE_PUSH, cap_domain_name(d));
    if (e)
        cap_attributes(e, a);
    pthread_mutex_unlock(&cap_mu);
    return cap_depth++;
}

static int NVTX_API cap_pop(nvtxDomainHandle_t d)
{
    pthread_mutex_lock(&cap_mu);
    cap_append(NVTX_CAPTURE_POP, cap_domain_name(d));
    pthread_mutex_unlock(&cap_mu);
    return cap_depth > 0 ? --cap_depth : -1;
}

static nvtxRangeId_t NVTX_API cap_start(nvtxDomainHandle_t d, const nvtxEventAttributes_t *a)
{
    pthread_mutex_lock(&cap_mu);
    uint64_t id = cap_next_range_id++;
    struct nvtx_capture_event *e = cap_append(NVTX_CAPTURE_START, cap_domain_name(d));
    if (e) {
        cap_attributes(e, a);
        e->range_id = id;
    }
    pthread_mutex_unlock(&cap_mu);
    return id;
}

static void NVTX_API cap_end(nvtxDomainHandle_t d, nvtxRangeId_t id)
{
    pthread_mutex_lock(&cap_mu);
    struct nvtx_capture_event *e = cap_append(NVTX_CAPTURE_END, cap_domain_name(d));
    if (e)
        e->range_id = id;
    pthread_mutex_unlock(&cap_mu);
}

static void NVTX_API cap_mark(nvtxDomainHandle_t d, const nvtxEventAttributes_t *a)
{
    pthread_mutex_lock(&cap_mu);
    struct nvtx_capture_event *e = cap_append(NVTX_CAPTURE_MARK, cap_domain_name(d));
    if (e)
        cap_attributes(e, a);
    pthread_mutex_unlock(&cap_mu);
}

/* the default domain (core module): same recorders with domain NULL */
static int NVTX_API cap_core_push_ex(const nvtxEventAttributes_t *a)
{
    return cap_push(NULL, a);
}
static int NVTX_API cap_core_push_a(const char *msg)
{
    nvtxEventAttributes_t a = {0};
    a.messageType = NVTX_MESSAGE_TYPE_ASCII;
    a.message.ascii = msg;
    return cap_push(NULL, &a);
}
static int NVTX_API cap_core_pop(void)
{
    return cap_pop(NULL);
}
static nvtxRangeId_t NVTX_API cap_core_start_ex(const nvtxEventAttributes_t *a)
{
    return cap_start(NULL, a);
}
static void NVTX_API cap_core_end(nvtxRangeId_t id)
{
    cap_end(NULL, id);
}
static void NVTX_API cap_core_mark_ex(const nvtxEventAttributes_t *a)
{
    cap_mark(NULL, a);
}
static void NVTX_API cap_core_name_category_a(uint32_t category, const char *name)
{
    cap_name_category(NULL, category, name);
}

static int cap_hook(const NvtxExportTableCallbacks *etbl, NvtxCallbackModule module,
                    const unsigned *ids, const NvtxFunctionPointer *fns, size_t n)
{
    NvtxFunctionTable table = NULL;
    unsigned size = 0;
    if (!etbl->GetModuleFunctionTable(module, &table, &size) || !table)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (ids[i] <= size && table[ids[i]])
            *table[ids[i]] = fns[i];
    return 1;
}

#define CAP_FN(f) ((NvtxFunctionPointer)(void (*)(void))(f))

int nvtx_capture_initialize(nvtx_capture_export_table_fn get_export_table)
{
    const NvtxExportTableCallbacks *etbl = get_export_table(NVTX_ETID_CALLBACKS);
    if (!etbl || etbl->struct_size < sizeof *etbl || !etbl->GetModuleFunctionTable)
        return 0;
    static const unsigned core2_ids[] = {
        NVTX_CBID_CORE2_DomainCreateA,        NVTX_CBID_CORE2_DomainDestroy,
        NVTX_CBID_CORE2_DomainRegisterStringA, NVTX_CBID_CORE2_DomainNameCategoryA,
        NVTX_CBID_CORE2_DomainRangePushEx,    NVTX_CBID_CORE2_DomainRangePop,
        NVTX_CBID_CORE2_DomainRangeStartEx,   NVTX_CBID_CORE2_DomainRangeEnd,
        NVTX_CBID_CORE2_DomainMarkEx};
    const NvtxFunctionPointer core2_fns[] = {
        CAP_FN(cap_domain_create), CAP_FN(cap_domain_destroy), CAP_FN(cap_register_string),
        CAP_FN(cap_name_category), CAP_FN(cap_push),           CAP_FN(cap_pop),
        CAP_FN(cap_start),         CAP_FN(cap_end),            CAP_FN(cap_mark)};
    static const unsigned core_ids[] = {
        NVTX_CBID_CORE_RangePushEx, NVTX_CBID_CORE_RangePushA,    NVTX_CBID_CORE_RangePop,
        NVTX_CBID_CORE_RangeStartEx, NVTX_CBID_CORE_RangeEnd,     NVTX_CBID_CORE_MarkEx,
        NVTX_CBID_CORE_NameCategoryA};
    const NvtxFunctionPointer core_fns[] = {
        CAP_FN(cap_core_push_ex),  CAP_FN(cap_core_push_a), CAP_FN(cap_core_pop),
        CAP_FN(cap_core_start_ex), CAP_FN(cap_core_end),    CAP_FN(cap_core_mark_ex),
        CAP_FN(cap_core_name_category_a)};
    if (!cap_hook(etbl, NVTX_CB_MODULE_CORE2, core2_ids, core2_fns, 9) ||
        !cap_hook(etbl, NVTX_CB_MODULE_CORE, core_ids, core_fns, 7))
        return 0;
    cap_attached = 1;
    return 1;
}

#else /* no NVTX3: never attach */

int nvtx_capture_initialize(nvtx_capture_export_table_fn get_export_table)
{
    (void)get_export_table;
    return 0;
}

#endif

/* ------------------------------------------------------------------------------------ */
/* save / load                                                                           */

#define CAP_COLUMNS 11
#define CAP_HEADER                                                                           \
    "op,tid,domain,name,registered,category,has_color,color,payload_type,payload,range_id\n"

int nvtx_capture_save(const char *path)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return error_set("nvtx capture: cannot create %s: %s", path, strerror(errno));
    fputs(CAP_HEADER, f);
    pthread_mutex_lock(&cap_mu);
    for (size_t i = 0; i < cap_count; i++) {
        const struct nvtx_capture_event *e = &cap_events[i];
        fprintf(f, "%s,%d,", nvtx_capture_op_name(e->op), e->tid);
        csv_fwrite(f, e->domain, strlen(e->domain));
        fputc(',', f);
        csv_fwrite(f, e->name, strlen(e->name));
        fprintf(f, ",%d,%" PRIu32 ",%d,%" PRIu32 ",%d,%" PRIu64 ",%" PRIu64 "\n", e->registered,
                e->category, e->has_color, e->color, e->payload_type, e->payload, e->range_id);
    }
    pthread_mutex_unlock(&cap_mu);
    if (fclose(f) != 0)
        return error_set("nvtx capture: cannot write %s: %s", path, strerror(errno));
    return 0;
}

struct cap_loader {
    char field[CAP_COLUMNS][NVTX_CAPTURE_NAME_MAX];
    int nfield, line, bad;
    struct nvtx_capture_event *ev;
    size_t n, cap;
};

static void cap_load_field(void *s, size_t len, void *data)
{
    struct cap_loader *l = data;
    if (l->nfield < CAP_COLUMNS) {
        size_t k = len < NVTX_CAPTURE_NAME_MAX - 1 ? len : NVTX_CAPTURE_NAME_MAX - 1;
        memcpy(l->field[l->nfield], s, k);
        l->field[l->nfield][k] = '\0';
    }
    l->nfield++;
}

static void cap_load_row(int c, void *data)
{
    (void)c;
    struct cap_loader *l = data;
    int nfield = l->nfield;
    l->nfield = 0;
    if (l->line++ == 0 || l->bad)
        return; /* header */
    if (nfield != CAP_COLUMNS) {
        l->bad = l->line;
        return;
    }
    if (VEC_RESERVE(l->ev, l->cap, l->n + 1)) {
        l->bad = l->line;
        return;
    }
    struct nvtx_capture_event *e = &l->ev[l->n];
    memset(e, 0, sizeof *e);
    int op = -1;
    for (int i = 0; i < NVTX_CAPTURE_OP_COUNT; i++)
        if (strcmp(l->field[0], cap_op_names[i]) == 0)
            op = i;
    if (op < 0) {
        l->bad = l->line;
        return;
    }
    e->op = (enum nvtx_capture_op)op;
    e->tid = atoi(l->field[1]);
    memcpy(e->domain, l->field[2], NVTX_CAPTURE_NAME_MAX);
    memcpy(e->name, l->field[3], NVTX_CAPTURE_NAME_MAX);
    e->registered = atoi(l->field[4]);
    e->category = (uint32_t)strtoul(l->field[5], NULL, 10);
    e->has_color = atoi(l->field[6]);
    e->color = (uint32_t)strtoul(l->field[7], NULL, 10);
    e->payload_type = atoi(l->field[8]);
    e->payload = strtoull(l->field[9], NULL, 10);
    e->range_id = strtoull(l->field[10], NULL, 10);
    l->n++;
}

int nvtx_capture_load(const char *path, struct nvtx_capture_event **events, size_t *n)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return error_set("nvtx capture: cannot open %s: %s", path, strerror(errno));
    struct csv_parser p;
    struct cap_loader *l = calloc(1, sizeof *l);
    if (!l || csv_init(&p, CSV_APPEND_NULL) != 0) {
        free(l);
        fclose(f);
        return error_set("nvtx capture: out of memory reading %s", path);
    }
    char buf[65536];
    size_t k;
    int rc = 0;
    while ((k = fread(buf, 1, sizeof buf, f)) > 0)
        if (csv_parse(&p, buf, k, cap_load_field, cap_load_row, l) != k) {
            rc = error_set("nvtx capture: %s: CSV error: %s", path, csv_strerror(csv_error(&p)));
            break;
        }
    if (rc == 0)
        csv_fini(&p, cap_load_field, cap_load_row, l);
    csv_free(&p);
    fclose(f);
    if (rc == 0 && l->bad)
        rc = error_set("nvtx capture: %s line %d: not a capture event (want %d fields)", path,
                       l->bad, CAP_COLUMNS);
    if (rc == 0) {
        *events = l->ev;
        *n = l->n;
    } else {
        free(l->ev);
    }
    free(l);
    return rc;
}

/* ------------------------------------------------------------------------------------ */
/* the training check                                                                    */

#define CHK_MAX_THREADS 16
#define CHK_MAX_DEPTH 64
#define CHK_MAX_OPEN 4096

struct chk_thread {
    int tid, depth;
    int phase[CHK_MAX_DEPTH];
    int in_step;           /* the outermost open range is a step */
    int64_t step;          /* its payload */
    int children[8], nchildren;
    int started, ended;    /* all-reduce ranges of this step */
};

struct chk_open {
    uint64_t id;
    int thread;
    int64_t step;
};

struct chk {
    struct chk_thread th[CHK_MAX_THREADS];
    int nth;
    struct chk_open open[CHK_MAX_OPEN];
    int nopen;
    int steps_seen;
    char *why;
    size_t cap;
};

static int chk_fail(struct chk *c, size_t i, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int chk_fail(struct chk *c, size_t i, const char *fmt, ...)
{
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    snprintf(c->why, c->cap, "event %zu: %s", i, msg);
    return -1;
}

static struct chk_thread *chk_thread_of(struct chk *c, int tid)
{
    for (int i = 0; i < c->nth; i++)
        if (c->th[i].tid == tid)
            return &c->th[i];
    if (c->nth == CHK_MAX_THREADS)
        return NULL;
    struct chk_thread *t = &c->th[c->nth++];
    memset(t, 0, sizeof *t);
    t->tid = tid;
    return t;
}

/* The phase named by e (allreduce for allreduce.bN, *bucket set), or -1. */
static int chk_phase_of(const struct nvtx_capture_event *e, int *bucket)
{
    *bucket = -1;
    if (strncmp(e->name, "allreduce.b", 11) == 0) {
        char *end;
        long b = strtol(e->name + 11, &end, 10);
        if (*end || end == e->name + 11 || b < 0)
            return -1;
        *bucket = (int)b;
        return PROBE_ALLREDUCE;
    }
    int ph = phase_from_name(e->name);
    /* a layer's range is named by the layer ("layer1.0"): its category says its phase */
    if (ph < 0 && !e->registered)
        for (int l = PROBE_LAYER_FORWARD; l <= PROBE_LAYER_BACKWARD; l++)
            if (e->category == phase_category((enum probe_phase)l))
                return l;
    return ph;
}

static int chk_attributes(struct chk *c, size_t i, const struct nvtx_capture_event *e, int ph)
{
    const int layer = ph == PROBE_LAYER_FORWARD || ph == PROBE_LAYER_BACKWARD;
    if (!e->registered && !layer) /* layers' names are plain ASCII messages */
        return chk_fail(c, i, "range '%s' is not a registered string", e->name);
    if (!e->has_color || e->color != phase_color((enum probe_phase)ph))
        return chk_fail(c, i, "range '%s' has colour %#x, not its phase's", e->name, e->color);
    if (e->category != phase_category((enum probe_phase)ph))
        return chk_fail(c, i, "range '%s' has category %u, not its phase's", e->name, e->category);
    if (e->payload_type != NVTX_CAPTURE_PAYLOAD_U64)
        return chk_fail(c, i, "range '%s' has payload type %d, not u64", e->name, e->payload_type);
    return 0;
}

static int chk_expected_children(const struct nvtx_capture_expect *x, int *want)
{
    int n = 0;
    if (x->data)
        want[n++] = PROBE_DATA;
    want[n++] = PROBE_FORWARD;
    want[n++] = PROBE_BACKWARD;
    want[n++] = PROBE_OPTIMIZER;
    return n;
}

static int chk_has_child(const struct chk_thread *t, int ph)
{
    for (int k = 0; k < t->nchildren; k++)
        if (t->children[k] == ph)
            return 1;
    return 0;
}

static int chk_push(struct chk *c, size_t i, const struct nvtx_capture_event *e,
                    const struct nvtx_capture_expect *x)
{
    struct chk_thread *t = chk_thread_of(c, e->tid);
    int bucket, ph = chk_phase_of(e, &bucket);
    if (!t)
        return chk_fail(c, i, "more than %d threads", CHK_MAX_THREADS);
    if (ph < 0 || ph == PROBE_ALLREDUCE)
        return chk_fail(c, i, "pushed range '%s' is not a phase", e->name);
    if (chk_attributes(c, i, e, ph))
        return -1;
    if (t->depth == CHK_MAX_DEPTH)
        return chk_fail(c, i, "ranges nested deeper than %d", CHK_MAX_DEPTH);
    /* a layer's range sits right inside its step's forward or backward */
    if (ph == PROBE_LAYER_FORWARD || ph == PROBE_LAYER_BACKWARD) {
        const int parent = ph == PROBE_LAYER_FORWARD ? PROBE_FORWARD : PROBE_BACKWARD;
        if (t->depth < 1 || t->phase[t->depth - 1] != parent)
            return chk_fail(c, i, "layer range '%s' not nested in %s (inside '%s')", e->name,
                            phase_name((enum probe_phase)parent),
                            t->depth ? phase_name((enum probe_phase)t->phase[t->depth - 1])
                                     : "nothing");
    }
    if (ph == PROBE_STEP) {
        if (t->depth != 0)
            return chk_fail(c, i, "step range nested in '%s' (depth %d)",
                            phase_name((enum probe_phase)t->phase[0]), t->depth);
        int64_t want = x->first_step + c->steps_seen;
        if ((int64_t)e->payload != want)
            return chk_fail(c, i, "step range %llu out of sequence (expected %lld)",
                            (unsigned long long)e->payload, (long long)want);
        c->steps_seen++;
        t->in_step = 1;
        t->step = (int64_t)e->payload;
        t->nchildren = t->started = t->ended = 0;
    } else if (t->in_step) {
        if ((int64_t)e->payload != t->step)
            return chk_fail(c, i, "range '%s' inside step %lld has payload %llu", e->name,
                            (long long)t->step, (unsigned long long)e->payload);
        if (t->depth == 1) {
            if (t->nchildren == 8)
                return chk_fail(c, i, "too many ranges in one step at '%s'", e->name);
            t->children[t->nchildren++] = ph;
            if (ph == PROBE_OPTIMIZER && (t->started != x->buckets || t->ended != x->buckets))
                return chk_fail(c, i, "step %lld: optimizer pushed with %d of %d all-reduce "
                                "ranges started and %d ended", (long long)t->step,
                                t->started, x->buckets, t->ended);
        }
    }
    t->phase[t->depth++] = ph;
    return 0;
}

static int chk_pop(struct chk *c, size_t i, const struct nvtx_capture_event *e,
                   const struct nvtx_capture_expect *x)
{
    struct chk_thread *t = chk_thread_of(c, e->tid);
    if (!t || t->depth == 0)
        return chk_fail(c, i, "pop on an empty stack (thread %d)", e->tid);
    int ph = t->phase[--t->depth];
    if (ph == PROBE_STEP) {
        int want[4], n = chk_expected_children(x, want);
        int ok = t->nchildren == n;
        for (int k = 0; ok && k < n; k++)
            ok = t->children[k] == want[k];
        if (!ok) {
            char got[128] = "";
            for (int k = 0; k < t->nchildren; k++) {
                strncat(got, phase_name((enum probe_phase)t->children[k]),
                        sizeof got - strlen(got) - 2);
                strcat(got, " ");
            }
            return chk_fail(c, i, "step %lld has direct children [ %s]: not the expected "
                            "[data] forward backward optimizer", (long long)t->step, got);
        }
        if (t->started != x->buckets)
            return chk_fail(c, i, "step %lld has %d all-reduce ranges, expected %d",
                            (long long)t->step, t->started, x->buckets);
        t->in_step = 0;
    }
    return 0;
}

static int chk_start(struct chk *c, size_t i, const struct nvtx_capture_event *e)
{
    struct chk_thread *t = chk_thread_of(c, e->tid);
    int bucket, ph = chk_phase_of(e, &bucket);
    if (ph != PROBE_ALLREDUCE)
        return chk_fail(c, i, "start/end range '%s' is not allreduce.bN", e->name);
    if (chk_attributes(c, i, e, ph))
        return -1;
    if (!t || !t->in_step)
        return chk_fail(c, i, "'%s' started outside a step", e->name);
    if ((int64_t)e->payload != t->step)
        return chk_fail(c, i, "'%s' has payload %llu, not its step's %lld", e->name,
                        (unsigned long long)e->payload, (long long)t->step);
    if (!chk_has_child(t, PROBE_BACKWARD) || chk_has_child(t, PROBE_OPTIMIZER))
        return chk_fail(c, i, "'%s' started before backward or after optimizer", e->name);
    if (bucket != t->started)
        return chk_fail(c, i, "'%s' started out of bucket order (expected b%d)", e->name,
                        t->started);
    if (c->nopen == CHK_MAX_OPEN)
        return chk_fail(c, i, "more than %d open ranges", CHK_MAX_OPEN);
    c->open[c->nopen++] = (struct chk_open){e->range_id, (int)(t - c->th), t->step};
    t->started++;
    return 0;
}

static int chk_end(struct chk *c, size_t i, const struct nvtx_capture_event *e)
{
    for (int k = 0; k < c->nopen; k++) {
        if (c->open[k].id != e->range_id)
            continue;
        struct chk_thread *t = &c->th[c->open[k].thread];
        if (!t->in_step || t->step != c->open[k].step || chk_has_child(t, PROBE_OPTIMIZER))
            return chk_fail(c, i, "all-reduce range of step %lld ended after optimizer "
                            "or after its step", (long long)c->open[k].step);
        t->ended++;
        c->open[k] = c->open[--c->nopen];
        return 0;
    }
    return chk_fail(c, i, "end of range id %llu that is not open",
                    (unsigned long long)e->range_id);
}

int nvtx_capture_check(const struct nvtx_capture_event *ev, size_t n,
                       const struct nvtx_capture_expect *x, char *why, size_t why_cap)
{
    struct chk *c = calloc(1, sizeof *c);
    if (!c) {
        snprintf(why, why_cap, "out of memory");
        return -1;
    }
    c->why = why;
    c->cap = why_cap;
    why[0] = '\0';
    int rc = 0, created = 0;
    int registered[PROBE_PHASE_COUNT] = {0}, named[PROBE_PHASE_COUNT] = {0};
    for (size_t i = 0; i < n && rc == 0; i++) {
        const struct nvtx_capture_event *e = &ev[i];
        if (strcmp(e->domain, "ddpprof") != 0)
            continue;
        int ph = phase_from_name(e->name);
        switch (e->op) {
        case NVTX_CAPTURE_DOMAIN_CREATE:
            created = 1;
            break;
        case NVTX_CAPTURE_REGISTER_STRING:
            if (ph >= 0)
                registered[ph] = 1;
            break;
        case NVTX_CAPTURE_NAME_CATEGORY:
            if (ph >= 0 && e->category == phase_category((enum probe_phase)ph))
                named[ph] = 1;
            break;
        case NVTX_CAPTURE_PUSH:
            rc = chk_push(c, i, e, x);
            break;
        case NVTX_CAPTURE_POP:
            rc = chk_pop(c, i, e, x);
            break;
        case NVTX_CAPTURE_START:
            rc = chk_start(c, i, e);
            break;
        case NVTX_CAPTURE_END:
            rc = chk_end(c, i, e);
            break;
        default:
            break;
        }
    }
    if (rc == 0 && !created)
        rc = chk_fail(c, n, "domain 'ddpprof' never created");
    for (int ph = 0; rc == 0 && ph < PROBE_PHASE_COUNT; ph++) {
        if (!registered[ph])
            rc = chk_fail(c, n, "phase name '%s' never registered",
                          phase_name((enum probe_phase)ph));
        else if (!named[ph])
            rc = chk_fail(c, n, "category of '%s' never named",
                          phase_name((enum probe_phase)ph));
    }
    for (int k = 0; rc == 0 && k < c->nth; k++)
        if (c->th[k].depth != 0)
            rc = chk_fail(c, n, "thread %d ends with open push ranges", c->th[k].tid);
    if (rc == 0 && c->nopen)
        rc = chk_fail(c, n, "%d all-reduce ranges never ended", c->nopen);
    if (rc == 0 && c->steps_seen != x->steps)
        rc = chk_fail(c, n, "%d step ranges seen, expected %d", c->steps_seen, x->steps);
    free(c);
    return rc;
}
