/* train_faults.c — fault injection for the failure tests only (tests/test_faults.sh):
 * DDPPROF_FAULT_SKIP_STEP=RANK:STEP makes rank RANK skip training step STEP entirely: the
 * tutorial's classic bug of one rank running one batch fewer, which must end in an error
 * naming the collective, never a hang.
 * DDPPROF_FAULT_INF_STEP=RANK:STEP puts an inf into rank RANK's loss gradient at STEP: the
 * GradScaler must skip that step on every rank and back off.
 * DDPPROF_FAULT_KILL_STEP=RANK:STEP makes rank RANK SIGKILL itself as step STEP begins, in
 * the first attempt only (TORCHELASTIC_RESTART_COUNT 0): an elastic restart must recover.
 * DDPPROF_FAULT_KILL_AFTER_MS=RANK:MS does the same as the first step begins that begins MS
 * milliseconds or more after the rank's first step began: a kill at a point in time, which
 * a fast machine does not reach in fewer steps than a slow one.
 * DDPPROF_FAULT_DELAY_MS=RANK:MS makes rank RANK sleep MS milliseconds at the start of every
 * step: a planted straggler (ddpprof tune's test finds it slower).
 * DDPPROF_FAULT_DELAY2_MS=RANK:MS adds a second such sleep, set apart from the first: two
 * independent stragglers, each removed by a candidate of its own (tune's combination test).
 * train_step.c acts on them. */
#include "train_rank.h"

#include <stdio.h>
#include <stdlib.h>

/* the step var names for this rank, 0 when it names none or another rank */
static long long fault_step(const char *var, int rank)
{
    const char *v = getenv(var);
    int r;
    long long step;
    if (v && sscanf(v, "%d:%lld", &r, &step) == 2 && r == rank)
        return step;
    return 0;
}

void rank_faults_read(struct rank *r)
{
    r->faults.skip_step = fault_step("DDPPROF_FAULT_SKIP_STEP", r->rank);
    r->faults.inf_step = fault_step("DDPPROF_FAULT_INF_STEP", r->rank);
    r->faults.kill_step =
        r->restart_count == 0 ? fault_step("DDPPROF_FAULT_KILL_STEP", r->rank) : 0;
    r->faults.delay_ms = fault_step("DDPPROF_FAULT_DELAY_MS", r->rank) +
                         fault_step("DDPPROF_FAULT_DELAY2_MS", r->rank);
    r->faults.kill_after_ms =
        r->restart_count == 0 ? fault_step("DDPPROF_FAULT_KILL_AFTER_MS", r->rank) : 0;
}
