/* svg.h — what the report's pictures share (charts.c's, stepview.c's): the colours of the
 * phase segments and a round axis step. */
#ifndef DDPPROF_REPORT_SVG_H
#define DDPPROF_REPORT_SVG_H

#include "report/analysis/analysis.h"

/* The colours of the phase segments (data, forward, backward, optimizer, exposed comm,
 * other), shared by every picture. */
extern const char *const seg_colors[SEG_COUNT];

/* A round axis step (1, 2 or 5 times a power of ten) giving about five ticks up to max. */
double chart_tick(double max);

#endif
