/* nvtx_capture.h — a tiny NVTX tool that records what a process emits, to check it.
 *
 * NVTX3 hands its function table to a "tool" (what nsys is) found either through
 * NVTX_INJECTION64_PATH (a shared library exporting InitializeInjectionNvtx2) or
 * statically: a program defining the symbol InitializeInjectionNvtx2_fnptr.  This module
 * is that tool, without a GPU or Nsight: it records domain creation, registered strings,
 * category names, push/pop and start/end ranges and marks, with their names (registered
 * strings resolved), categories, colours and payloads, per OS thread.
 *
 * Two ways in:
 *   - in-process (a test that drives the probes itself): put NVTX_CAPTURE_STATIC_INJECTION;
 *     at file scope, then call nvtx_capture_events() after the NVTX calls;
 *   - another program (the real trainer, every rank): run it with
 *     NVTX_INJECTION64_PATH=<build>/libddpprof_nvtx_inject.so and DDPPROF_NVTX_CAPTURE=<dir>;
 *     each process writes <dir>/nvtx.<pid>.csv at exit; read it with nvtx_capture_load().
 * nvtx_capture_check() then checks a training's ranges (see struct nvtx_capture_expect).
 *
 * Built without NVTX3 (nvtx_compiled() == 0), nvtx_capture_initialize refuses to attach
 * and nothing is ever recorded. */
#ifndef DDPPROF_NVTX_CAPTURE_H
#define DDPPROF_NVTX_CAPTURE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* NVTX's NvtxGetExportTableFunc_t and the tool entry point (NvtxInitializeInjectionNvtxFunc_t):
 * returns 1 when attached. */
typedef const void *(*nvtx_capture_export_table_fn)(uint32_t export_table_id);
int nvtx_capture_initialize(nvtx_capture_export_table_fn get_export_table);

/* Static injection: defines the symbol NVTX3 looks for (overrides NVTX's weak one). */
#define NVTX_CAPTURE_STATIC_INJECTION                                                         \
    int (*InitializeInjectionNvtx2_fnptr)(nvtx_capture_export_table_fn) = nvtx_capture_initialize

enum nvtx_capture_op {
    NVTX_CAPTURE_DOMAIN_CREATE = 0, /* name: the domain's */
    NVTX_CAPTURE_DOMAIN_DESTROY,
    NVTX_CAPTURE_REGISTER_STRING,   /* name: the string */
    NVTX_CAPTURE_NAME_CATEGORY,     /* category, name */
    NVTX_CAPTURE_PUSH,
    NVTX_CAPTURE_POP,
    NVTX_CAPTURE_START,             /* range_id: the id returned */
    NVTX_CAPTURE_END,               /* range_id: the id ended */
    NVTX_CAPTURE_MARK,
    NVTX_CAPTURE_OP_COUNT
};

#define NVTX_CAPTURE_NAME_MAX 64

struct nvtx_capture_event {
    enum nvtx_capture_op op;
    int tid;                              /* OS thread id */
    char domain[NVTX_CAPTURE_NAME_MAX];   /* "" for NVTX's default domain */
    char name[NVTX_CAPTURE_NAME_MAX];     /* message (registered strings resolved) */
    int registered;                       /* 1: the message was a registered string */
    uint32_t category;
    int has_color;
    uint32_t color;                       /* ARGB */
    int payload_type;                     /* NVTX_PAYLOAD_TYPE_* (0: none) */
    uint64_t payload;                     /* its 64 bits (u64 payloads as is) */
    uint64_t range_id;
};

/* NVTX_PAYLOAD_TYPE_UNSIGNED_INT64's value, for callers without the NVTX headers. */
#define NVTX_CAPTURE_PAYLOAD_U64 1

/* 1 once NVTX attached this tool in this process. */
int nvtx_capture_attached(void);

/* The events recorded so far (in order) and their count.  Valid until the next NVTX call
 * or reset; do not call while other threads emit NVTX. */
size_t nvtx_capture_events(const struct nvtx_capture_event **events);

/* Forget the recorded events (domains and registered strings stay known). */
void nvtx_capture_reset(void);

/* "push", "pop", ... as in the saved files. */
const char *nvtx_capture_op_name(enum nvtx_capture_op op);

/* Save the recorded events as CSV (op,tid,domain,name,registered,category,has_color,
 * color,payload_type,payload,range_id).  0 or -1 (error_set). */
int nvtx_capture_save(const char *path);

/* Read a file written by nvtx_capture_save: *events (caller frees) and *n.  0 or -1
 * (error_set: cannot read, malformed line). */
int nvtx_capture_load(const char *path, struct nvtx_capture_event **events, size_t *n);

/* What one process's training should have emitted in domain "ddpprof". */
struct nvtx_capture_expect {
    int steps;          /* step ranges expected, exactly */
    int64_t first_step; /* their payloads: first_step, first_step + 1, ... */
    int buckets;        /* all-reduce ranges allreduce.b0 .. b(buckets-1) per step (0: none) */
    int data;           /* 1: each step has a data range first */
    int world_size;     /* > 0: the rank mark ("ddpprof nvtx=2 rank=R world_size=W", before the
                           first step) must say this world size; 0: not checked */
};

/* Check the ddpprof-domain events of ev[0..n): the domain was created; every phase name
 * was registered and its category named; per thread, pushes and pops balance and never
 * pop an empty stack; every push/start has a registered message that is a phase name (or
 * allreduce.bN), that phase's colour and category, and a u64 payload (probes/nvtx.h): the
 * enclosing step's number, but the images (> 0) for forward and the bytes for a collective
 * (> 0 for allreduce.bN); with x->world_size, one rank mark with that world size came
 * before the first step; each step range contains, as direct children in this order, [data],
 * forward, backward, optimizer; each step has one start/end range allreduce.bK per bucket
 * K, started in bucket order after backward was pushed and ended before optimizer was
 * pushed; steps are numbered first_step, first_step + 1, ...  Returns 0, or -1 with the
 * first violation in why (no error_set: tests print it). */
int nvtx_capture_check(const struct nvtx_capture_event *ev, size_t n,
                       const struct nvtx_capture_expect *x, char *why, size_t why_cap);

#ifdef __cplusplus
}
#endif
#endif
