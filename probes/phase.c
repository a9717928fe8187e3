/* phase.c — the per-phase table: NVTX colours and categories, trace lanes; the names are
 * the trace format's (probes/trace_format.h). */
#include "probes/phase.h"

#include <string.h>

static const struct {
    uint32_t color; /* 0xAARRGGBB, distinct hues that read well on Nsight's dark theme */
    enum trace_lane stream;
} phase_table[PROBE_PHASE_COUNT] = {
    [PROBE_STEP] = {0xFF9E9E9Eu, TRACE_LANE_COMPUTE},
    [PROBE_DATA] = {0xFF8E44ADu, TRACE_LANE_DATA},
    [PROBE_FORWARD] = {0xFF2E86DEu, TRACE_LANE_COMPUTE},
    [PROBE_BACKWARD] = {0xFFE67E22u, TRACE_LANE_COMPUTE},
    [PROBE_ALLREDUCE] = {0xFF27AE60u, TRACE_LANE_COMM},
    [PROBE_OPTIMIZER] = {0xFFC0392Bu, TRACE_LANE_COMPUTE},
    [PROBE_EVAL] = {0xFF16A085u, TRACE_LANE_COMPUTE},
    [PROBE_BARRIER] = {0xFF7F8C8Du, TRACE_LANE_COMM},
    [PROBE_SETUP] = {0xFF34495Eu, TRACE_LANE_COMPUTE},
    [PROBE_COMM_ALLREDUCE] = {0xFF1E8449u, TRACE_LANE_COMM},
    [PROBE_COMM_BROADCAST] = {0xFF48C9B0u, TRACE_LANE_COMM},
    [PROBE_COMM_ALLGATHER] = {0xFF82E0AAu, TRACE_LANE_COMM},
    [PROBE_COMM_REDUCE_SCATTER] = {0xFF117864u, TRACE_LANE_COMM},
    [PROBE_COMM_REDUCE] = {0xFF0E6655u, TRACE_LANE_COMM},
    [PROBE_LAYER_FORWARD] = {0xFF85C1E9u, TRACE_LANE_COMPUTE},
    [PROBE_LAYER_BACKWARD] = {0xFFF5B041u, TRACE_LANE_COMPUTE},
};

static int phase_valid(enum probe_phase ph)
{
    return (int)ph >= 0 && ph < PROBE_PHASE_COUNT;
}

const char *phase_name(enum probe_phase ph)
{
    return phase_valid(ph) ? trace_phase_name((int)ph) : "?";
}

int phase_from_name(const char *name)
{
    return trace_phase_of(name, strlen(name));
}

uint32_t phase_color(enum probe_phase ph)
{
    return phase_valid(ph) ? phase_table[ph].color : 0xFFFFFFFFu;
}

uint32_t phase_category(enum probe_phase ph)
{
    return phase_valid(ph) ? (uint32_t)ph + 1 : 0;
}

int phase_stream(enum probe_phase ph)
{
    return phase_valid(ph) ? (int)phase_table[ph].stream : TRACE_LANE_COMPUTE;
}
