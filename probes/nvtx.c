/* nvtx.c — NVTX3 ranges in the "ddpprof" domain (no-ops when built without NVTX3). */
#include "probes/nvtx.h"

#include "common/error.h"
#include "common/vec.h"

#include <stdio.h>
#include <stdlib.h>

#ifdef DDPPROF_HAVE_NVTX
#include <nvtx3/nvToolsExt.h>

#define NVTX_MAX_REGISTERED_BUCKETS 4096 /* beyond this, bucket names go as plain strings */

struct nvtx_ranges {
    nvtxDomainHandle_t domain;
    nvtxStringHandle_t phase_str[PROBE_PHASE_COUNT];
    nvtxStringHandle_t *bucket_str; /* registered "allreduce.bN" (NULL: not yet), grown on
                                       first use */
    size_t cap_bucket_str;
};

int nvtx_compiled(void)
{
    return 1;
}

struct nvtx_ranges *nvtx_ranges_create(void)
{
    struct nvtx_ranges *n = calloc(1, sizeof *n);
    if (!n) {
        error_set("nvtx: out of memory");
        return NULL;
    }
    n->domain = nvtxDomainCreateA("ddpprof");
    for (int ph = 0; ph < PROBE_PHASE_COUNT; ph++) {
        n->phase_str[ph] = nvtxDomainRegisterStringA(n->domain, phase_name((enum probe_phase)ph));
        nvtxDomainNameCategoryA(n->domain, phase_category((enum probe_phase)ph),
                                phase_name((enum probe_phase)ph));
    }
    return n;
}

static void nvtx_attr_init(nvtxEventAttributes_t *a, enum probe_phase ph, uint64_t step)
{
    *a = (nvtxEventAttributes_t){0};
    a->version = NVTX_VERSION;
    a->size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    a->category = phase_category(ph);
    a->colorType = NVTX_COLOR_ARGB;
    a->color = phase_color(ph);
    a->payloadType = NVTX_PAYLOAD_TYPE_UNSIGNED_INT64;
    a->payload.ullValue = step;
}

void nvtx_ranges_push(struct nvtx_ranges *n, enum probe_phase ph, uint64_t step)
{
    nvtxEventAttributes_t a;
    nvtx_attr_init(&a, ph, step);
    a.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
    a.message.registered = n->phase_str[(unsigned)ph < PROBE_PHASE_COUNT ? ph : PROBE_SETUP];
    nvtxDomainRangePushEx(n->domain, &a);
}

void nvtx_ranges_push_named(struct nvtx_ranges *n, enum probe_phase ph, const char *name,
                            uint64_t step)
{
    if (!name) {
        nvtx_ranges_push(n, ph, step);
        return;
    }
    nvtxEventAttributes_t a;
    nvtx_attr_init(&a, ph, step);
    a.messageType = NVTX_MESSAGE_TYPE_ASCII;
    a.message.ascii = name;
    nvtxDomainRangePushEx(n->domain, &a);
}

void nvtx_ranges_pop(struct nvtx_ranges *n)
{
    nvtxDomainRangePop(n->domain);
}

static nvtxStringHandle_t nvtx_bucket_string(struct nvtx_ranges *n, int bucket)
{
    if (bucket < 0 || bucket >= NVTX_MAX_REGISTERED_BUCKETS)
        return NULL;
    if ((size_t)bucket >= n->cap_bucket_str) {
        size_t old = n->cap_bucket_str;
        if (VEC_RESERVE(n->bucket_str, n->cap_bucket_str, (size_t)bucket + 1))
            return NULL;
        for (size_t i = old; i < n->cap_bucket_str; i++)
            n->bucket_str[i] = NULL;
    }
    if (!n->bucket_str[bucket]) {
        char name[32];
        snprintf(name, sizeof name, "allreduce.b%d", bucket);
        n->bucket_str[bucket] = nvtxDomainRegisterStringA(n->domain, name);
    }
    return n->bucket_str[bucket];
}

uint64_t nvtx_ranges_start_bucket(struct nvtx_ranges *n, int bucket, uint64_t step)
{
    nvtxEventAttributes_t a;
    nvtx_attr_init(&a, PROBE_ALLREDUCE, step);
    nvtxStringHandle_t s = nvtx_bucket_string(n, bucket);
    char name[32];
    if (s) {
        a.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
        a.message.registered = s;
    } else {
        snprintf(name, sizeof name, "allreduce.b%d", bucket);
        a.messageType = NVTX_MESSAGE_TYPE_ASCII;
        a.message.ascii = name;
    }
    return nvtxDomainRangeStartEx(n->domain, &a);
}

void nvtx_ranges_end(struct nvtx_ranges *n, uint64_t id)
{
    nvtxDomainRangeEnd(n->domain, id);
}

void nvtx_ranges_destroy(struct nvtx_ranges *n)
{
    if (!n)
        return;
    nvtxDomainDestroy(n->domain);
    free(n->bucket_str);
    free(n);
}

#else /* no NVTX3 headers: no-ops */

struct nvtx_ranges {
    int unused;
};

int nvtx_compiled(void)
{
    return 0;
}

struct nvtx_ranges *nvtx_ranges_create(void)
{
    struct nvtx_ranges *n = calloc(1, sizeof *n);
    if (!n)
        error_set("nvtx: out of memory");
    return n;
}

void nvtx_ranges_push(struct nvtx_ranges *n, enum probe_phase ph, uint64_t step)
{
    (void)n, (void)ph, (void)step;
}

void nvtx_ranges_push_named(struct nvtx_ranges *n, enum probe_phase ph, const char *name,
                            uint64_t step)
{
    (void)n, (void)ph, (void)name, (void)step;
}

void nvtx_ranges_pop(struct nvtx_ranges *n)
{
    (void)n;
}

uint64_t nvtx_ranges_start_bucket(struct nvtx_ranges *n, int bucket, uint64_t step)
{
    (void)n, (void)bucket, (void)step;
    return 0;
}

void nvtx_ranges_end(struct nvtx_ranges *n, uint64_t id)
{
    (void)n, (void)id;
}

void nvtx_ranges_destroy(struct nvtx_ranges *n)
{
    free(n);
}

#endif
