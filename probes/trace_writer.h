/* trace_writer.h — rankN.trace.csv: buffered, thread-safe, whole rows only, signal-safe.
 *
 * Writes the format of probes/trace_format.h (explained in probes/TRACE.md), quoting names
 * as libcsv does.  Rows are formatted into
 * a memory buffer (no allocation per row) and written with write(2) in whole rows when
 * the buffer passes its threshold, at least once a second (a flusher thread per writer,
 * TRACE_FLUSH_INTERVAL_MS_DEFAULT), at trace_writer_flush/close, and from a handler for
 * SIGSEGV, SIGBUS, SIGABRT, SIGTERM and SIGINT, so a crash loses at most the rows still in
 * the buffer, a SIGKILL (or a hang ended by one) at most the last second's rows, and the
 * file never ends in a partial row.
 *
 * Threads: any number of threads may add rows to one writer (a mutex serialises them).
 * The flusher thread takes the same mutex for its flush; it runs with every signal
 * blocked, so asynchronous signals land in the threads that add rows.
 *
 * Signals: the handler never takes the mutex.  Ownership of the buffer is one atomic word
 * (idle / appending / flushing / handler / stopped, with the owner's thread id); the
 * handler takes it with a compare-and-swap.  Appends publish a row by advancing the
 * committed length only after the row's bytes are in the buffer, so the handler can take
 * over from an append (its own thread's or another's) and write exactly the committed
 * rows.  It can take over from its own thread's interrupted flush at once: the file
 * offset (lseek) says how much of that flush reached the file, and it writes the rest.
 * Another thread's flush is given up to 100 ms to finish first; a flush still inside one
 * write(2) after that could duplicate rows (never split one).  While a handler writes,
 * other threads' appends wait for it.  After writing, the handler chains to the action
 * that was installed before (an ignored signal is not hooked at all) or, for the default
 * action, restores it and re-raises the signal.  The writer then stays stopped (later
 * rows are dropped and counted, so no row is written after one that was lost) unless the
 * handler found it idle and chained to a handler that may let the process live: then
 * the writer goes on as if flushed.
 * Handlers are installed when the first writer opens and restored (if still ours) when
 * the last closes.  In a forked child, the parent's writers are skipped by the handler. */
#ifndef DDPPROF_TRACE_WRITER_H
#define DDPPROF_TRACE_WRITER_H

#include "probes/phase.h"
#include "probes/trace_format.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One row of the trace (probes/TRACE.md).  name NULL means the phase name; a name of any
 * length is written whole.  end_ns < start_ns is written as end_ns = start_ns. */
struct trace_row {
    int rank;
    int64_t step;
    int epoch;
    enum probe_phase phase;
    int bucket; /* -1 unless phase is allreduce */
    enum trace_clock clock;
    int64_t start_ns, end_ns;
    uint64_t bytes;
    const char *name;
    enum trace_kind kind;
    int64_t stream;
};

/* Where producers of rows (CUPTI processing, CUDA events) send them; trace_writer_emit
 * is the one that writes to a trace_writer (ctx). */
typedef void (*trace_emit_fn)(void *ctx, const struct trace_row *row);

#define TRACE_FLUSH_BYTES_DEFAULT (256u * 1024u)
#define TRACE_FLUSH_INTERVAL_MS_DEFAULT 1000u
/* a row up to this long (trace_row_bytes) is formatted in the writer's buffer; a longer one
 * (a name of more than ~1.9 KB) goes to the file on its own, after the buffered rows */
#define TRACE_ROW_MAX 4096

struct trace_writer;

/* Create (truncate) dir/rank<rank>.trace.csv (TRACE_FILE_FORMAT) and write its header
 * line (TRACE_HEADER) at once, and start its flusher thread (every
 * TRACE_FLUSH_INTERVAL_MS_DEFAULT ms).  flush_bytes: buffer threshold (0:
 * TRACE_FLUSH_BYTES_DEFAULT).  dir must exist.
 * NULL + error_set (cannot create the file or the thread, out of memory, more than 16
 * writers open). */
struct trace_writer *trace_writer_open(const char *dir, int rank, size_t flush_bytes);

/* Append one row; writes the buffer out when it passes the threshold.  0, or -1 with
 * error_set when the row was lost (a failed write, or the writer was stopped by a signal
 * handler).  Thread-safe; row and its name are only read. */
int trace_writer_add(struct trace_writer *w, const struct trace_row *row);

/* trace_emit_fn adapter: trace_writer_add((struct trace_writer *)ctx, row), errors counted. */
void trace_writer_emit(void *ctx, const struct trace_row *row);

/* The flusher's interval in ms from now on (0: no timed flush; the buffer is then written
 * only at its threshold, at flush/close and from the signal handler).  Thread-safe. */
void trace_writer_set_flush_interval(struct trace_writer *w, unsigned ms);

/* Write the buffered rows now.  0, or -1 with error_set when this write failed or rows
 * were lost earlier in the writer's life (the message of trace_writer_close: how many and
 * the first cause), so a caller that flushes now and then learns of a full disk early. */
int trace_writer_flush(struct trace_writer *w);

/* Rows added so far, and rows lost (failed writes, writer stopped, emit errors). */
uint64_t trace_writer_rows(const struct trace_writer *w);
uint64_t trace_writer_lost(const struct trace_writer *w);

/* Flush, close and free (w may be NULL).  0, or -1 with error_set if any row was lost
 * during the writer's life (the message says how many and the first cause). */
int trace_writer_close(struct trace_writer *w);

/* An upper bound on the bytes trace_format_row writes for row (its name quoted at worst). */
size_t trace_row_bytes(const struct trace_row *row);

/* Format row into buf (cap >= trace_row_bytes(row)) as one CSV line with its "\n"; returns
 * its length.  Exposed for tests and benchmarks. */
size_t trace_format_row(char *buf, size_t cap, const struct trace_row *row);

#ifdef __cplusplus
}
#endif
#endif
