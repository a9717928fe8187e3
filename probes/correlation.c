/* correlation.c — external correlation ids (pack/unpack) and the correlation-id ring. */
#include "probes/correlation.h"

#include "common/error.h"

#include <stdlib.h>

/* Layer ranges (layer.forward, layer.backward) push no external id: the kernels a layer
 * launches stay attributed to the forward or backward around it (probe.c), so only the
 * phases before them need to fit. */
_Static_assert(PROBE_LAYER_FORWARD + 1 <= 16, "phase + 1 fits the external id's 4 bits");

/* bits 60..63 phase + 1, 44..59 bucket + 1 (0: none), 32..43 epoch, 0..31 step */
uint64_t corr_encode(enum probe_phase ph, int64_t step, int epoch, int bucket)
{
    uint64_t p = (unsigned)ph < PROBE_LAYER_FORWARD ? (uint64_t)ph + 1 : (uint64_t)PROBE_SETUP + 1;
    uint64_t b = bucket >= 0 && bucket <= CORR_MAX_BUCKET ? (uint64_t)bucket + 1 : 0;
    uint64_t e = epoch < 0 ? 0 : epoch > CORR_MAX_EPOCH ? CORR_MAX_EPOCH : (uint64_t)epoch;
    uint64_t s = step < 0 ? 0 : step > CORR_MAX_STEP ? (uint64_t)CORR_MAX_STEP : (uint64_t)step;
    return p << 60 | b << 44 | e << 32 | s;
}

int corr_decode(uint64_t id, enum probe_phase *ph, int64_t *step, int *epoch, int *bucket)
{
    uint64_t p = id >> 60;
    if (p == 0 || p > PROBE_LAYER_FORWARD)
        return -1;
    *ph = (enum probe_phase)(p - 1);
    *bucket = (int)((id >> 44) & 0xFFFF) - 1;
    *epoch = (int)((id >> 32) & 0xFFF);
    *step = (int64_t)(id & 0xFFFFFFFFu);
    return 0;
}

struct corr_slot {
    uint32_t correlation_id;
    uint32_t used;
    uint64_t external_id;
};

struct corr_map {
    size_t mask;
    struct corr_slot *slots;
};

struct corr_map *corr_map_create(size_t capacity)
{
    size_t cap = 1;
    if (capacity == 0)
        capacity = 65536;
    while (cap < capacity)
        cap <<= 1;
    struct corr_map *m = malloc(sizeof *m);
    struct corr_slot *s = calloc(cap, sizeof *s);
    if (!m || !s) {
        free(m);
        free(s);
        error_set("correlation map: out of memory for %zu entries", cap);
        return NULL;
    }
    m->mask = cap - 1;
    m->slots = s;
    return m;
}

void corr_map_put(struct corr_map *m, uint32_t correlation_id, uint64_t external_id)
{
    struct corr_slot *s = &m->slots[correlation_id & m->mask];
    s->correlation_id = correlation_id;
    s->used = 1;
    s->external_id = external_id;
}

int corr_map_get(const struct corr_map *m, uint32_t correlation_id, uint64_t *external_id)
{
    const struct corr_slot *s = &m->slots[correlation_id & m->mask];
    if (!s->used || s->correlation_id != correlation_id)
        return 0;
    *external_id = s->external_id;
    return 1;
}

void corr_map_destroy(struct corr_map *m)
{
    if (!m)
        return;
    free(m->slots);
    free(m);
}
