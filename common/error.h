/* error.h — status codes with a message, the project's one error path.
 *
 * A failing function calls error_set() with one line that says what, where and what to
 * do, and returns its result (-1).  Callers pass the -1 up unchanged; only main() prints
 * error_get() and decides to exit.  The message is thread-local, so comm and loader
 * threads can fail without racing the main thread. */
#ifndef DDPPROF_ERROR_H
#define DDPPROF_ERROR_H

#ifdef __cplusplus
extern "C" {
#endif

/* Record a one-line message (printf format) for this thread, control bytes escaped
 * (common/printable.h); returns -1. */
int error_set(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Prefix the current message with more context ("loading X: <old message>"); returns -1. */
int error_wrap(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* The last message set on this thread ("" if none).  Owned by the thread; valid until
 * the next error_set/error_wrap/error_clear on it. */
const char *error_get(void);

void error_clear(void);

#ifdef __cplusplus
}
#endif
#endif
