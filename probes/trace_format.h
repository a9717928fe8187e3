/* trace_format.h — the per-rank trace file format, written once: the file name, the
 * columns and the header line, the values of the phase, clock and kind columns, the lanes
 * of the stream column and the name cap.  probes/TRACE.md explains what they mean; this
 * header is what both sides compile against: the writer (probes/trace_writer.c,
 * probes/phase.c) and the reader (report/run.c, report/analysis.c, report/timeline.c).
 *
 * Header-only and dependency-free on purpose: report/ may include this one file of
 * probes/ and does not link ddpprof_probes (cmake/layers.cmake).  Each list is an X-macro
 * (X(ID, "name")) expanded here into an enum and a name lookup, so a value and its name
 * cannot drift apart; adding a value means adding one line to its list. */
#ifndef DDPPROF_TRACE_FORMAT_H
#define DDPPROF_TRACE_FORMAT_H

#include <stddef.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

/* dir/TRACE_FILE_FORMAT with the rank: "rank3.trace.csv" */
#define TRACE_FILE_FORMAT "rank%d.trace.csv"

/* meta.csv key (printf format, the rank) of a rank's offset to rank 0's clock, in ns */
#define TRACE_META_CLOCK_OFFSET_FORMAT "clock_offset_ns.rank%d"

/* names longer than this many bytes are cut there (at a UTF-8 boundary) */
#define TRACE_NAME_MAX 1024

/* ---- columns, in file order: FIRST(ID, "name") once, then X(ID, "name") ---- */
#define TRACE_COLUMNS(FIRST, X)                                                              \
    FIRST(RANK, "rank")                                                                      \
    X(STEP, "step")                                                                          \
    X(EPOCH, "epoch")                                                                        \
    X(PHASE, "phase")                                                                        \
    X(BUCKET, "bucket")                                                                      \
    X(CLOCK, "clock")                                                                        \
    X(START, "start_ns")                                                                     \
    X(END, "end_ns")                                                                         \
    X(BYTES, "bytes")                                                                        \
    X(NAME, "name")                                                                          \
    X(KIND, "kind")                                                                          \
    X(STREAM, "stream")

#define TRACE_COL_ENUM_(id, name) TRACE_COL_##id,
enum trace_column { TRACE_COLUMNS(TRACE_COL_ENUM_, TRACE_COL_ENUM_) TRACE_COL_COUNT };
#undef TRACE_COL_ENUM_

#define TRACE_COL_FIRST_(id, name) name
#define TRACE_COL_NEXT_(id, name) "," name
/* "rank,step,...,stream": the header line without its newline (a string literal) */
#define TRACE_COLUMNS_CSV TRACE_COLUMNS(TRACE_COL_FIRST_, TRACE_COL_NEXT_)
/* the first line of every trace file */
#define TRACE_HEADER TRACE_COLUMNS_CSV "\n"

/* ---- the phase column, in enum probe_phase order (probes/phase.h) ---- */
#define TRACE_PHASES(X)                                                                      \
    X(STEP, "step")           /* one optimizer step: contains data, forward, backward,    \
                                 optimizer */                                                \
    X(DATA, "data")           /* loading / copying a batch */                               \
    X(FORWARD, "forward")                                                                    \
    X(BACKWARD, "backward")                                                                  \
    X(ALLREDUCE, "allreduce") /* one DDP bucket's all-reduce (bucket column set) */         \
    X(OPTIMIZER, "optimizer")                                                                \
    X(EVAL, "eval")                                                                          \
    X(BARRIER, "barrier")                                                                    \
    X(SETUP, "setup")         /* outside training steps; also CUPTI activity launched      \
                                 outside any range */

#define TRACE_PHASE_ENUM_(id, name) TRACE_PHASE_##id,
enum trace_phase { TRACE_PHASES(TRACE_PHASE_ENUM_) TRACE_PHASE_COUNT };
#undef TRACE_PHASE_ENUM_

/* ---- the clock column ---- */
#define TRACE_CLOCKS(X)                                                                      \
    X(HOST, "host")     /* CLOCK_MONOTONIC of the rank's host */                            \
    X(DEVICE, "device") /* CUDA events, converted to the host clock */                      \
    X(CUPTI, "cupti")   /* CUPTI activity timestamps, same clock as host */

#define TRACE_CLOCK_ENUM_(id, name) TRACE_CLOCK_##id,
enum trace_clock { TRACE_CLOCKS(TRACE_CLOCK_ENUM_) TRACE_CLOCK_COUNT };
#undef TRACE_CLOCK_ENUM_

/* ---- the kind column ---- */
#define TRACE_KINDS(X)                                                                       \
    X(RANGE, "range") /* a probe range */                                                   \
    X(KERNEL, "kernel")                                                                      \
    X(MEMCPY, "memcpy")                                                                      \
    X(MEMSET, "memset")                                                                      \
    X(SYNC, "sync")

#define TRACE_KIND_ENUM_(id, name) TRACE_KIND_##id,
enum trace_kind { TRACE_KINDS(TRACE_KIND_ENUM_) TRACE_KIND_COUNT };
#undef TRACE_KIND_ENUM_

/* ---- the stream column of range rows: lanes (CUPTI rows hold the CUDA stream id) ---- */
#define TRACE_LANES(X)                                                                       \
    X(COMPUTE, "compute") /* the training thread / compute stream */                        \
    X(COMM, "comm")       /* the comm thread / NCCL stream: allreduce rows */               \
    X(DATA, "data")       /* data loading: data rows */

#define TRACE_LANE_ENUM_(id, name) TRACE_LANE_##id,
enum trace_lane { TRACE_LANES(TRACE_LANE_ENUM_) TRACE_LANE_COUNT };
#undef TRACE_LANE_ENUM_

/* ---- names: the column's text for a value, NULL for an out-of-range value ---- */
#define TRACE_NAME_ENTRY_(id, name) name,

static inline const char *trace_column_name(int col)
{
    static const char *const names[] = {
        TRACE_COLUMNS(TRACE_NAME_ENTRY_, TRACE_NAME_ENTRY_)};
    return col >= 0 && col < TRACE_COL_COUNT ? names[col] : NULL;
}

static inline const char *trace_phase_name(int phase)
{
    static const char *const names[] = {TRACE_PHASES(TRACE_NAME_ENTRY_)};
    return phase >= 0 && phase < TRACE_PHASE_COUNT ? names[phase] : NULL;
}

static inline const char *trace_clock_name(int clock)
{
    static const char *const names[] = {TRACE_CLOCKS(TRACE_NAME_ENTRY_)};
    return clock >= 0 && clock < TRACE_CLOCK_COUNT ? names[clock] : NULL;
}

static inline const char *trace_kind_name(int kind)
{
    static const char *const names[] = {TRACE_KINDS(TRACE_NAME_ENTRY_)};
    return kind >= 0 && kind < TRACE_KIND_COUNT ? names[kind] : NULL;
}

static inline const char *trace_lane_name(int lane)
{
    static const char *const names[] = {TRACE_LANES(TRACE_NAME_ENTRY_)};
    return lane >= 0 && lane < TRACE_LANE_COUNT ? names[lane] : NULL;
}

#undef TRACE_NAME_ENTRY_

/* The value among the first count whose name (name_of) is s[0..len), or -1.
 * s need not be NUL-terminated.  Use through the four lookups below. */
static inline int trace_value_of(const char *(*name_of)(int), int count, const char *s,
                                 size_t len)
{
    for (int v = 0; v < count; v++) {
        const char *n = name_of(v);
        if (strlen(n) == len && memcmp(n, s, len) == 0)
            return v;
    }
    return -1;
}

/* enum trace_column / trace_phase / trace_clock / trace_kind of a name, or -1 */
static inline int trace_column_of(const char *s, size_t len)
{
    return trace_value_of(trace_column_name, TRACE_COL_COUNT, s, len);
}

static inline int trace_phase_of(const char *s, size_t len)
{
    return trace_value_of(trace_phase_name, TRACE_PHASE_COUNT, s, len);
}

static inline int trace_clock_of(const char *s, size_t len)
{
    return trace_value_of(trace_clock_name, TRACE_CLOCK_COUNT, s, len);
}

static inline int trace_kind_of(const char *s, size_t len)
{
    return trace_value_of(trace_kind_name, TRACE_KIND_COUNT, s, len);
}

#ifdef __cplusplus
}
#endif
#endif
