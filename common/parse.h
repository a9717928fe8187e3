/* parse.h — the one strict whole-number parser for text from outside the program
 * (checkpoint metadata, store counters, run directories' CSV fields).
 *
 * strtoll alone takes leading spaces, a '+', trailing text and stops at a NUL byte; a
 * reader of outside input wants none of that.  Each caller adds its own range check and
 * its own message. */
#ifndef DDPPROF_PARSE_H
#define DDPPROF_PARSE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* s[0..len) as a whole decimal number: an optional '-', then one or more ASCII digits
 * (leading zeros allowed), nothing else (no spaces, no '+', no NUL byte), its value in
 * [INT64_MIN, INT64_MAX].  s need not be NUL-terminated.  0 with *out set, or -1 with
 * *out unchanged; no error_set (the caller knows what the text was). */
int parse_i64(const char *s, size_t len, int64_t *out);

#ifdef __cplusplus
}
#endif
#endif
