/* warn.h — the report's one side channel: "ddpprof report: warning: ..." on stderr, one
 * line whatever names from the traces it quotes (common/printable.h).  A partial report
 * goes on; the user is told what is missing. */
#ifndef DDPPROF_REPORT_WARN_H
#define DDPPROF_REPORT_WARN_H

void report_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
