/* probe.h — the one instrumentation API the trainer calls.
 *
 * A probe turns each phase range into (1) an NVTX range in domain "ddpprof" (probes/nvtx.h),
 * (2) a host-clock row in <run_dir>/rank<N>.trace.csv (probes/TRACE.md), and on a GPU
 * (3) a CUPTI external correlation id, so every kernel, memcpy and memset it launched
 * becomes a `cupti` row attributed to its phase, step and bucket, and in full mode only
 * (4) a CUDA event pair on the stream doing the work (a `device` row).
 *
 * Modes (--trace off|nvtx|kernels|full), in order of cost:
 *   PROBE_OFF      nothing at all: no file, every call returns on one flag test.
 *   PROBE_NVTX     NVTX ranges and host rows; no CUPTI, no CUDA events (for runs under
 *                  nsys, which owns CUPTI itself).
 *   PROBE_KERNELS  the default: PROBE_NVTX and, on a GPU, CUPTI's activity records of
 *                  kernels, memcpys and memsets (delivered to the trace off the training
 *                  thread: probes/gpu.h), attributed by correlation: per range a CUPTI
 *                  correlation push and pop and nothing else -- no CUDA call, no event, no
 *                  host sync -- as Kineto and nsys do.  The trainer records no layer ranges.
 *   PROBE_FULL     PROBE_KERNELS plus a CUDA event pair per range (device rows), and the
 *                  trainer's per-layer ranges (train_layers.c), each with its own pair: what
 *                  grows with the model's layers is asked for here only.
 *   On a CPU rank kernels and full are nvtx for the probe itself (full still has the
 *   trainer's layer ranges).
 * What each adds per training step is counted by tests/test_probe_cost.c.
 *
 * Threads: every probe_* call except probe_row comes from the training thread (NVTX
 * push/pop and the range stack are per thread).  probe_row may be called from any thread,
 * as CUPTI's records are written from the tracer's flusher thread.
 * A NULL probe is accepted everywhere and does nothing.
 *
 * Cost: no allocation per range (the first time a bucket number is seen excepted); a pop
 * formats one row into the writer's buffer. */
#ifndef DDPPROF_PROBE_H
#define DDPPROF_PROBE_H

#include "probes/phase.h"
#include "probes/trace_writer.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum probe_mode { PROBE_OFF = 0, PROBE_NVTX, PROBE_KERNELS, PROBE_FULL };

struct probe_opts {
    int rank;               /* global rank: the trace file name and the rank column */
    int world_size;         /* ranks in the job (0: not known, taken as 1): NVTX's rank mark */
    const char *run_dir;    /* existing directory for rank<rank>.trace.csv (unused when off) */
    enum probe_mode mode;
    int gpu;                /* 1: this rank computes on a CUDA device (kernels: CUPTI; full:
                               also events) */
    void *compute_stream;   /* cudaStream_t of the compute work (NULL: the legacy default stream) */
    void *comm_stream;      /* cudaStream_t of the all-reduces (NCCL), or NULL (or set later:
                               probe_set_comm_stream): no device rows for all-reduces until
                               then (CUPTI still attributes their kernels) */
    int comm_host_staged;   /* 1: the all-reduces run on the host through copies of the device
                               buffers (comm shm-staged): no CUDA events can time them, so
                               in full mode each bucket's device row is its host-timed round
                               trip, named allreduce.bN.host-staged (TRACE.md) */
    int cupti;              /* 1: use CUPTI in kernels and full mode on a GPU */
    int quiet;              /* 1: do not print the one-line "CUPTI unavailable" notice */
    size_t flush_bytes;     /* trace buffer threshold; 0: TRACE_FLUSH_BYTES_DEFAULT (256 KiB) */
};

/* kernels mode (the default), rank 0, run_dir ".", CPU, cupti on, not quiet */
void probe_opts_default(struct probe_opts *o);

/* "off", "nvtx", "kernels", "full" -> mode; 0, or -1 with error_set naming the accepted
 * values. */
int probe_mode_parse(const char *s, enum probe_mode *mode);
const char *probe_mode_name(enum probe_mode mode);

struct probe;

/* Create the probe.  Off: an inert probe (no file, no NVTX).  Otherwise creates
 * rank<N>.trace.csv (header written) and the NVTX domain; with gpu set, in kernels and
 * full mode also CUPTI, in full mode also CUDA event timers.  If CUPTI cannot be used the
 * reason is one line, printed once per process to stderr unless quiet and kept for
 * probe_gpu_note; the rest goes on.  NULL + error_set when the trace file cannot be created or memory runs out;
 * CUDA event timers failing is also an error (a GPU rank whose stream does not work). */
struct probe *probe_create(const struct probe_opts *o);

/* The stream the all-reduces run on (the comm's stream slot), known only once the comm
 * exists, instead of probe_opts.comm_stream.  From then on each bucket also gets a device row.
 * Does nothing unless the probe is in full mode on a GPU, or for a NULL stream.  0, or -1
 * with error_set (CUDA error). */
int probe_set_comm_stream(struct probe *p, void *stream);

/* The step (1-based, global across epochs; 0 outside training) and epoch (1-based) the
 * next ranges belong to.  Also writes the device rows of completed event pairs (never
 * waits).  Call it before pushing PROBE_STEP. */
void probe_set_step(struct probe *p, int64_t step, int epoch);

/* Open / close a phase range (nested; at most PROBE_MAX_DEPTH open, deeper pushes are
 * counted and ignored with their pops).  The host row is written at pop, with the step
 * and epoch current at push.  ph must not be PROBE_ALLREDUCE (see probe_bucket_*). */
#define PROBE_MAX_DEPTH 16
void probe_push(struct probe *p, enum probe_phase ph);
/* probe_push for a range with a quantity, its NVTX payload instead of the step
 * (probes/nvtx.h): the images of the rank's batch for PROBE_FORWARD, the payload bytes for
 * a collective (comm.*, barrier) -- the bytes its pop (probe_pop_bytes) writes too. */
void probe_push_sized(struct probe *p, enum probe_phase ph, uint64_t size);
void probe_pop(struct probe *p);
/* probe_push for a range with a name and bytes of its own: a model layer's
 * (PROBE_LAYER_FORWARD / PROBE_LAYER_BACKWARD; name its module name, bytes its parameter
 * bytes).  name must stay valid until the pop (the row is written then); the NVTX range is
 * named name.  Layer ranges push no CUPTI external id: their kernels are attributed to the
 * forward or backward around them. */
void probe_push_named(struct probe *p, enum probe_phase ph, const char *name, uint64_t bytes);
/* probe_pop for a range that moved data: its rows carry bytes (a collective's payload:
 * the comm.* phases, TRACE.md) */
void probe_pop_bytes(struct probe *p, uint64_t bytes);

/* A DDP bucket's all-reduce, in three calls on the training thread:
 *   probe_bucket_launch  right before the asynchronous all-reduce is issued: starts the
 *                        NVTX range "allreduce.bN", remembers the host time and step, and
 *                        on a GPU pushes the bucket's correlation id and records the start
 *                        event on comm_stream.  The caller must have made comm_stream wait
 *                        for the compute stream already (the comm's order slot; the DDP
 *                        reducer does), else the device row also spans the rest of
 *                        backward that the all-reduce waits for;
 *   probe_bucket_issued  right after it was issued: pops the correlation id and records
 *                        the end event (a no-op on CPU);
 *   probe_bucket_range   when its wait returned: ends the NVTX range and writes the host
 *                        row (stream 1) from start_ns to end_ns, when the transport ran it
 *                        (struct comm_span); both 0 means the transport cannot tell (NCCL):
 *                        the row then spans launch to now.  With comm_host_staged (full
 *                        mode) it also writes the bucket's device row, launch to now,
 *                        named allreduce.bN.host-staged.
 * bucket >= 0.  The NVTX range nests in step; it starts inside backward and ends before
 * optimizer (TRACE.md). */
void probe_bucket_launch(struct probe *p, int bucket, uint64_t bytes);
void probe_bucket_issued(struct probe *p, int bucket);
void probe_bucket_range(struct probe *p, int bucket, uint64_t bytes, int64_t start_ns,
                        int64_t end_ns);

/* Write one row as is (rank filled in); any thread.  For spans measured elsewhere. */
void probe_row(struct probe *p, const struct trace_row *row);

/* Write out everything buffered (trace rows, completed device rows, CUPTI records).
 * 0 or -1 (error_set). */
int probe_flush(struct probe *p);

struct probe_stats {
    uint64_t rows;            /* rows written to the trace (all clocks) */
    uint64_t rows_lost;       /* rows that could not be written */
    uint64_t unbalanced;      /* pops without a push, pushes beyond PROBE_MAX_DEPTH,
                                 ranges still open at destroy */
    uint64_t device_dropped;  /* event pairs dropped (ring full) */
    uint64_t cupti_records;   /* CUPTI records processed */
    uint64_t cupti_rows;      /* rows written from them (of rows; from the tracer's thread) */
    uint64_t cupti_dropped;   /* records CUPTI dropped (cuptiActivityGetNumDroppedRecords) */
    uint64_t cupti_unattributed; /* GPU activity launched outside every range */
    int cupti_active;         /* 1 when CUPTI is tracing */
};
void probe_stats(struct probe *p, struct probe_stats *st);

/* "" or the one line saying why CUPTI is not tracing (valid while p lives). */
const char *probe_gpu_note(const struct probe *p);

/* Close open ranges (NVTX too), drain the device rows and CUPTI, flush and close the
 * trace, free.  Call it before the CUDA streams are destroyed.  0, or -1 with error_set
 * when rows were lost (on an error path, ignore the result to keep the first error). */
int probe_destroy(struct probe *p);

#ifdef __cplusplus
}
#endif
#endif
