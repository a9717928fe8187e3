/* gpu_loader.c — probes/gpu.h for the program, in every build.
 *
 * CUPTI tracing and CUDA event timing live in libddpprof_probes_cuda.so (gpu_module.h),
 * which a CUDA build puts next to the ddpprof binary; the first cupti_tracer_start or
 * event_timer_create loads it (common/plugin.h), so probes on CPU ranks never map CUPTI
 * or cudart.  A tracer or timer exists only once the module is loaded, so the calls on
 * one forward to it, and the calls on NULL (CPU ranks, CUPTI unavailable) answer here as
 * the module would.  When the module cannot be loaded — a build without CUDA, the file or
 * a library it needs missing — the constructors say why in one line, as they say
 * "unavailable" for a machine without a GPU; everything else in the probes works.
 *
 * CMake passes DDPPROF_CUDA_BUILT: 1 when it builds the module. */
#include "probes/gpu.h"

#include "common/error.h"
#include "common/plugin.h"
#include "probes/cuda/gpu_module.h"

#include <pthread.h>
#include <stdio.h>

static pthread_once_t gpu_once = PTHREAD_ONCE_INIT;
static const struct gpu_module *gpu_mod; /* set once by gpu_module_open */
static char gpu_why[1024];               /* why it is NULL */

static void gpu_module_open(void)
{
    if (!DDPPROF_CUDA_BUILT) {
        snprintf(gpu_why, sizeof gpu_why, "this build has no CUDA (CPU-only build)");
        return;
    }
    gpu_mod = plugin_load(GPU_MODULE_FILE, GPU_MODULE_TABLE, GPU_MODULE_ABI);
    if (!gpu_mod)
        snprintf(gpu_why, sizeof gpu_why,
                 "the CUDA probes could not be loaded (%s): " GPU_MODULE_FILE " must lie "
                 "next to the ddpprof binary, with CUPTI and the CUDA runtime",
                 error_get());
}

/* the module, or NULL with gpu_why saying why */
static const struct gpu_module *gpu_module_get(void)
{
    pthread_once(&gpu_once, gpu_module_open);
    return gpu_mod;
}

struct cupti_tracer *cupti_tracer_start(struct activity_proc *ap, char *why, size_t why_cap)
{
    const struct gpu_module *m = gpu_module_get();
    if (m)
        return m->cupti_start(ap, why, why_cap);
    snprintf(why, why_cap, "CUPTI unavailable: %s", gpu_why);
    return NULL;
}

void cupti_tracer_push(struct cupti_tracer *t, uint64_t external_id)
{
    if (t)
        gpu_mod->cupti_push(t, external_id);
}

void cupti_tracer_pop(struct cupti_tracer *t)
{
    if (t)
        gpu_mod->cupti_pop(t);
}

int cupti_tracer_flush(struct cupti_tracer *t)
{
    return t ? gpu_mod->cupti_flush(t) : 0;
}

uint64_t cupti_tracer_dropped(const struct cupti_tracer *t)
{
    return t ? gpu_mod->cupti_dropped(t) : 0;
}

void cupti_tracer_stop(struct cupti_tracer *t)
{
    if (t)
        gpu_mod->cupti_stop(t);
}

struct event_timer *event_timer_create(void *stream)
{
    const struct gpu_module *m = gpu_module_get();
    if (m)
        return m->timer_create(stream);
    error_set("CUDA event timing unavailable: %s", gpu_why);
    return NULL;
}

int event_timer_begin(struct event_timer *t)
{
    return t ? gpu_mod->timer_begin(t) : -1;
}

void event_timer_end(struct event_timer *t, int slot, const struct trace_row *row)
{
    if (t)
        gpu_mod->timer_end(t, slot, row);
}

void event_timer_poll(struct event_timer *t, trace_emit_fn emit, void *ctx)
{
    if (t)
        gpu_mod->timer_poll(t, emit, ctx);
}

void event_timer_drain(struct event_timer *t, trace_emit_fn emit, void *ctx)
{
    if (t)
        gpu_mod->timer_drain(t, emit, ctx);
}

uint64_t event_timer_dropped(const struct event_timer *t)
{
    return t ? gpu_mod->timer_dropped(t) : 0;
}

void event_timer_destroy(struct event_timer *t)
{
    if (t)
        gpu_mod->timer_destroy(t);
}
