/* conv_algos.h — the candidate algorithms of one direction of one convolution plan
 * (conv_plan.c), as a list that remembers which candidates are dead.
 *
 * Pure bookkeeping with no CUDA types, `static inline` like kernel_math.h, so the host
 * tests (tests/test_cuda_host.c) check the retry rules without a GPU:
 *   - candidates are kept best first; conv_algos_next walks the live ones in that order;
 *   - a candidate that fails with a cuDNN error is dead for good (it cannot run this
 *     shape);
 *   - one that could not get its workspace (out of device memory, a transient state) stays
 *     alive: the next call tries it first again, so a moment of memory pressure does not
 *     demote a convolution to a slower algorithm for the rest of the run.
 * Internal to trainer/cuda/. */
#ifndef DDPPROF_CONV_ALGOS_H
#define DDPPROF_CONV_ALGOS_H

#include <stddef.h>

#define CONV_MAX_CANDIDATES 16

struct conv_algos {
    int ready; /* the list has been filled (cuDNN asked once) */
    int count;
    int algo[CONV_MAX_CANDIDATES]; /* cuDNN's algorithm enum */
    int math[CONV_MAX_CANDIDATES]; /* the cudnnMathType_t to run it with */
    size_t ws[CONV_MAX_CANDIDATES]; /* workspace bytes */
    unsigned char dead[CONV_MAX_CANDIDATES];
};

/* Append a candidate unless the algorithm is listed already, the list is full or it asks
 * for more than ws_limit bytes of workspace.  1 if added, else 0. */
static inline int conv_algos_add(struct conv_algos *a, int algo, int math, size_t ws,
                                 size_t ws_limit)
{
    for (int i = 0; i < a->count; i++)
        if (a->algo[i] == algo)
            return 0;
    if (a->count == CONV_MAX_CANDIDATES || ws > ws_limit)
        return 0;
    a->algo[a->count] = algo;
    a->math[a->count] = math;
    a->ws[a->count] = ws;
    a->dead[a->count] = 0;
    a->count++;
    return 1;
}

/* the first live candidate at index i or after it, or count when there is none */
static inline int conv_algos_next(const struct conv_algos *a, int i)
{
    while (i < a->count && a->dead[i])
        i++;
    return i;
}

/* candidate i failed when run: for want of memory (transient != 0: it stays alive) or
 * with a cuDNN error (dead from now on) */
static inline void conv_algos_failed(struct conv_algos *a, int i, int transient)
{
    if (i >= 0 && i < a->count && !transient)
        a->dead[i] = 1;
}

/* the number of live candidates */
static inline int conv_algos_live(const struct conv_algos *a)
{
    int n = 0;
    for (int i = 0; i < a->count; i++)
        n += !a->dead[i];
    return n;
}

#endif
