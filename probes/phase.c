/* phase.c — the per-phase table: names, NVTX colours and categories, trace lanes. */
#include "probes/phase.h"

#include <string.h>

static const struct {
    const char *name;
    uint32_t color; /* 0xAARRGGBB, distinct hues that read well on Nsight's dark theme */
    int stream;
} phase_table[PROBE_PHASE_COUNT] = {
    [PROBE_STEP] = {"step", 0xFF9E9E9Eu, 0},
    [PROBE_DATA] = {"data", 0xFF8E44ADu, 2},
    [PROBE_FORWARD] = {"forward", 0xFF2E86DEu, 0},
    [PROBE_BACKWARD] = {"backward", 0xFFE67E22u, 0},
    [PROBE_ALLREDUCE] = {"allreduce", 0xFF27AE60u, 1},
    [PROBE_OPTIMIZER] = {"optimizer", 0xFFC0392Bu, 0},
    [PROBE_EVAL] = {"eval", 0xFF16A085u, 0},
    [PROBE_BARRIER] = {"barrier", 0xFF7F8C8Du, 0},
    [PROBE_SETUP] = {"setup", 0xFF34495Eu, 0},
};

static int phase_valid(enum probe_phase ph)
{
    return (int)ph >= 0 && ph < PROBE_PHASE_COUNT;
}

const char *phase_name(enum probe_phase ph)
{
    return phase_valid(ph) ? phase_table[ph].name : "?";
}

int phase_from_name(const char *name)
{
    for (int i = 0; i < PROBE_PHASE_COUNT; i++)
        if (strcmp(name, phase_table[i].name) == 0)
            return i;
    return -1;
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
    return phase_valid(ph) ? phase_table[ph].stream : 0;
}
