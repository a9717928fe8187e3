/* gpu.h — the GPU half of the probes: CUPTI activity tracing and CUDA event pairs.
 *
 * Implemented in probes/cuda/, built when the build has CUDA (DDPPROF_HAVE_CUDA) as
 * libddpprof_probes_cuda.so; the program's definitions are probes/cuda/gpu_loader.c's,
 * which load it on the first cupti_tracer_start or event_timer_create, or have the
 * constructors say "unavailable" and why (no CUDA build, module missing) — so probe.c
 * has no #ifdef and probes on CPU ranks load no CUDA library.
 * No CUDA types appear here: streams travel as void * (a cudaStream_t). */
#ifndef DDPPROF_GPU_H
#define DDPPROF_GPU_H

#include "probes/activity.h"
#include "probes/trace_writer.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- CUPTI activity tracing (probes/cuda/cupti_*.c) ----
 * Kernels (concurrent), memcpy, memset, synchronization, external correlation, runtime
 * and driver API records (the last two only make CUPTI emit the correlation records: a
 * kernel that NCCL, cuDNN or cuBLAS launches through the driver API, cuLaunchKernelEx, is
 * correlated only through the driver call's record) in 4 MiB buffers; CUPTI's timestamps come from clock_now_ns (cuptiActivityRegisterTimestampCallback),
 * so cupti rows share the host rows' clock.  Completed buffers are converted to
 * struct activity_record and fed to the activity_proc given at start: on the tracer's
 * flusher thread, which takes CUPTI's completed buffers every 500 ms, on CUPTI's own
 * thread (a buffer that filled up), or inside cupti_tracer_flush and cupti_tracer_stop --
 * not on the training thread during its steps.  So ap's rows come from other threads
 * (struct activity_proc and the trace writer are thread-safe).  One tracer per process. */
struct cupti_tracer;

/* Start tracing into ap (which must outlive the tracer).  NULL when CUPTI cannot be used
 * here — no CUDA build, no driver or device, CUPTI already in use (e.g. under nsys), or a
 * second tracer — with a one-line reason in why (no error_set: not an error, the other
 * probes go on). */
struct cupti_tracer *cupti_tracer_start(struct activity_proc *ap, char *why, size_t why_cap);

/* Push/pop the calling thread's external correlation id (corr_encode) around launches. */
void cupti_tracer_push(struct cupti_tracer *t, uint64_t external_id);
void cupti_tracer_pop(struct cupti_tracer *t);

/* Deliver every buffered record now (forced flush: an epoch's end, what the flusher thread
 * has not delivered yet), on the calling thread.  0 or -1 (error_set). */
int cupti_tracer_flush(struct cupti_tracer *t);

/* Records CUPTI dropped (buffers full/unavailable), summed over contexts and streams. */
uint64_t cupti_tracer_dropped(const struct cupti_tracer *t);

/* Flush, disable the activity kinds, unsubscribe, free (t may be NULL).  After this the
 * activity_proc may be destroyed. */
void cupti_tracer_stop(struct cupti_tracer *t);

/* ---- CUDA event pairs (probes/cuda/event_timer.c) ----
 * A ring of (start, end) cudaEvent pairs recorded on one stream around each range.
 * Nothing waits for them: event_timer_poll, called once per step, writes the pairs that
 * have completed, oldest first, and stops at the first that has not.  Device times are
 * put on the host clock through an anchor event whose host time was read with the stream
 * idle at creation (error <= half the synchronize latency, a few microseconds), re-anchored
 * about every second (float milliseconds keep sub-microsecond resolution) with the new
 * anchor's host time from the host clock: the device's elapsed time since the previous
 * anchor, clamped into the host times that bracket the new anchor event (recorded at or
 * after the host began recording it, at or before the host saw it complete), so the
 * device clock's drift against the host (tens of ppm) is corrected at every re-anchor
 * instead of adding up (probes/event_anchor.h).  A re-anchor is recorded when the stream
 * is idle and looked for, without a sync, for up to 50 us: its bracket is then tight. */
struct event_timer;

#define EVENT_TIMER_SLOTS 1024

/* A timer on stream (a cudaStream_t; NULL is the legacy default stream).  Synchronizes
 * the stream once.  NULL + error_set (no CUDA build, CUDA error). */
struct event_timer *event_timer_create(void *stream);

/* Record a start event; returns its slot, or -1 when all slots wait (the range is
 * counted as dropped) or on a CUDA error. */
int event_timer_begin(struct event_timer *t);

/* Record slot's end event; row (name copied, up to 63 bytes) is what poll writes with
 * start_ns/end_ns replaced by the device times and clock set to device. */
void event_timer_end(struct event_timer *t, int slot, const struct trace_row *row);

/* Write completed pairs to emit(ctx, row) without waiting. */
void event_timer_poll(struct event_timer *t, trace_emit_fn emit, void *ctx);

/* Synchronize the stream and write every ended pair (at the end of a run). */
void event_timer_drain(struct event_timer *t, trace_emit_fn emit, void *ctx);

/* Ranges dropped because every slot was waiting. */
uint64_t event_timer_dropped(const struct event_timer *t);

void event_timer_destroy(struct event_timer *t);

#ifdef __cplusplus
}
#endif
#endif
