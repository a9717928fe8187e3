/* test_probes_cupti_records.c — the CUDA half of CUPTI attribution, without a GPU (CUDA
 * builds only: it needs cupti.h).
 *
 * 1. What the tracer enables: kernels, external correlation, runtime AND driver API
 *    records.  Without DRIVER, CUPTI writes no external-correlation record for a driver
 *    call, so every kernel NCCL, cuDNN or cuBLAS launches through cuLaunchKernel(Ex) is
 *    unattributed (issue 11, defect 3).  The calls switched off again must launch nothing.
 * 2. Real CUPTI record structs (CUpti_ActivityAPI of kind DRIVER for cuLaunchKernelEx,
 *    CUpti_ActivityExternalCorrelation, CUpti_ActivityKernel10 of an NCCL kernel) through
 *    cupti_record_convert into the record processing: the kernel lands in its step and
 *    bucket; another tool's correlation kind is ignored. */
#include "probes/activity.h"
#include "probes/correlation.h"
#include "probes/cuda/cupti_internal.h"
#include "testutil.h"

#include <stdio.h>
#include <string.h>

static int kind_enabled(CUpti_ActivityKind k)
{
    for (size_t i = 0; i < cupti_tracer_nkinds; i++)
        if (cupti_tracer_kinds[i] == k)
            return 1;
    return 0;
}

static int in_list(const CUpti_CallbackId *list, size_t n, CUpti_CallbackId id)
{
    for (size_t i = 0; i < n; i++)
        if (list[i] == id)
            return 1;
    return 0;
}

static void test_kinds(void)
{
    CHECK(kind_enabled(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL), "kernels not traced");
    CHECK(kind_enabled(CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION),
          "external correlation not traced");
    CHECK(kind_enabled(CUPTI_ACTIVITY_KIND_RUNTIME), "runtime API records off: kernels "
          "launched by the runtime get no correlation");
    CHECK(kind_enabled(CUPTI_ACTIVITY_KIND_DRIVER), "driver API records off: kernels NCCL, "
          "cuDNN and cuBLAS launch with cuLaunchKernelEx get no correlation");
    CHECK(!kind_enabled(CUPTI_ACTIVITY_KIND_KERNEL), "the serializing KERNEL kind is enabled");

    /* nothing that launches, copies or sets memory may be switched off */
    static const CUpti_CallbackId launches[] = {
        CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel,
        CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz,
        CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx,
        CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz,
        CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel,
        CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz,
        CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch,
        CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz,
        CUPTI_DRIVER_TRACE_CBID_cuMemcpyAsync,
        CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoDAsync_v2,
        CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoHAsync_v2,
        CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoDAsync_v2,
        CUPTI_DRIVER_TRACE_CBID_cuMemsetD32Async,
        CUPTI_DRIVER_TRACE_CBID_cuMemsetD8Async,
        CUPTI_DRIVER_TRACE_CBID_cuEventRecord,
        CUPTI_DRIVER_TRACE_CBID_cuStreamWaitEvent,
    };
    for (size_t i = 0; i < sizeof launches / sizeof launches[0]; i++)
        CHECK(!in_list(cupti_tracer_quiet_driver, cupti_tracer_nquiet_driver, launches[i]),
              "driver call %u that launches work is switched off", (unsigned)launches[i]);
    static const CUpti_CallbackId rt_launches[] = {
        CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000,
        CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060,
        CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020,
        CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_v3020,
        CUPTI_RUNTIME_TRACE_CBID_cudaEventRecord_v3020,
        CUPTI_RUNTIME_TRACE_CBID_cudaStreamWaitEvent_v3020,
        CUPTI_RUNTIME_TRACE_CBID_cudaLaunchHostFunc_v10000,
    };
    for (size_t i = 0; i < sizeof rt_launches / sizeof rt_launches[0]; i++)
        CHECK(!in_list(cupti_tracer_quiet_runtime, cupti_tracer_nquiet_runtime, rt_launches[i]),
              "runtime call %u that launches work is switched off", (unsigned)rt_launches[i]);
    CHECK(in_list(cupti_tracer_quiet_runtime, cupti_tracer_nquiet_runtime,
                  CUPTI_RUNTIME_TRACE_CBID_cudaEventQuery_v3020),
          "cudaEventQuery (a poll) still recorded");
}

/* ---- real record structs through the conversion ----------------------------------- */

#define SINK_MAX 16

struct sink {
    struct trace_row rows[SINK_MAX];
    char names[SINK_MAX][256];
    int n;
};

static void sink_emit(void *ctx, const struct trace_row *row)
{
    struct sink *s = ctx;
    if (s->n == SINK_MAX)
        return;
    s->rows[s->n] = *row;
    snprintf(s->names[s->n], sizeof s->names[0], "%s", row->name ? row->name : "");
    s->rows[s->n].name = s->names[s->n];
    s->n++;
}

static void feed(struct activity_proc *ap, const void *rec, int want_written)
{
    struct activity_record r;
    int written = cupti_record_convert((const CUpti_Activity *)rec, &r);
    CHECK(written == want_written, "convert kind %d: %d, want %d",
          (int)((const CUpti_Activity *)rec)->kind, written, want_written);
    activity_proc_add(ap, &r);
}

static void test_records(void)
{
    static struct sink s;
    s.n = 0;
    struct activity_proc *ap = activity_proc_create(3, sink_emit, &s);
    CHECK(ap != NULL, "create");
    if (!ap)
        return;
    const uint64_t b2 = corr_encode(PROBE_ALLREDUCE, 7, 1, 2);
    const char *nccl = "ncclDevKernel_AllReduce_Sum_f32_RING_LL";

    CUpti_ActivityKernel10 k;
    memset(&k, 0, sizeof k);
    k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
    k.correlationId = 42;
    k.start = 5000;
    k.end = 9000;
    k.streamId = 21;
    k.name = nccl;
    feed(ap, &k, 1); /* before its correlation, as CUPTI often delivers it */

    CUpti_ActivityExternalCorrelation other;
    memset(&other, 0, sizeof other);
    other.kind = CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION;
    other.externalKind = CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM1; /* not ours */
    other.correlationId = 42;
    other.externalId = corr_encode(PROBE_OPTIMIZER, 99, 9, -1);
    feed(ap, &other, 0);

    CUpti_ActivityExternalCorrelation e;
    memset(&e, 0, sizeof e);
    e.kind = CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION;
    e.externalKind = CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0;
    e.correlationId = 42;
    e.externalId = b2;
    feed(ap, &e, 1);

    CUpti_ActivityAPI a;
    memset(&a, 0, sizeof a);
    a.kind = CUPTI_ACTIVITY_KIND_DRIVER;
    a.cbid = CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx;
    a.correlationId = 42;
    a.start = 4000;
    a.end = 4100;
    struct activity_record conv;
    CHECK(cupti_record_convert((const CUpti_Activity *)&a, &conv) == 1 &&
              conv.kind == ACTIVITY_API && conv.subkind == ACTIVITY_API_DRIVER &&
              conv.cbid == CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx &&
              conv.correlation_id == 42,
          "driver record converted: kind %d subkind %d cbid %u", (int)conv.kind, conv.subkind,
          (unsigned)conv.cbid);
    activity_proc_add(ap, &conv);
    a.kind = CUPTI_ACTIVITY_KIND_RUNTIME;
    a.cbid = CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000;
    a.correlationId = 43;
    feed(ap, &a, 1);
    activity_proc_end_batch(ap);

    CHECK(s.n == 1, "%d rows, want the kernel's", s.n);
    const struct trace_row *r = s.n ? &s.rows[0] : NULL;
    CHECK(r && strcmp(r->name, nccl) == 0 && r->phase == PROBE_ALLREDUCE && r->step == 7 &&
              r->epoch == 1 && r->bucket == 2 && r->stream == 21 && r->start_ns == 5000 &&
              r->end_ns == 9000 && r->kind == TRACE_KIND_KERNEL && r->clock == TRACE_CLOCK_CUPTI,
          "NCCL kernel row: phase %d step %lld bucket %d stream %lld",
          r ? (int)r->phase : -1, r ? (long long)r->step : -1LL, r ? r->bucket : -9,
          r ? (long long)r->stream : -9LL);
    struct activity_stats st;
    activity_proc_stats(ap, &st);
    CHECK(st.api_driver == 1 && st.api_runtime == 1 && st.other == 1,
          "stats: driver %llu runtime %llu other %llu", (unsigned long long)st.api_driver,
          (unsigned long long)st.api_runtime, (unsigned long long)st.other);
    activity_proc_destroy(ap);
}

int main(void)
{
    test_kinds();
    test_records();
    return test_finish();
}
