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
 *     demote a convolution to a slower algorithm for the rest of the run;
 *   - which cuDNN statuses are that transient state is conv_status_transient's call;
 *   - a candidate's workspace may be unknown (CONV_WS_UNKNOWN) until it is about to run:
 *     asking cuDNN for it builds the algorithm's plan, which for half-type tensor-op
 *     algorithms took up to 1.9 s per shape on an H200, so only the candidate that runs
 *     is asked (conv_algos_sized), as PyTorch does.
 * Internal to trainer/cuda/. */
#ifndef DDPPROF_CONV_ALGOS_H
#define DDPPROF_CONV_ALGOS_H

#include <stddef.h>

#define CONV_MAX_CANDIDATES 16
#define CONV_WS_UNKNOWN ((size_t)-1) /* workspace not asked for yet */

struct conv_algos {
    int stage; /* how far the list has been filled (conv_plan.c, enum conv_stage) */
    int count;
    int algo[CONV_MAX_CANDIDATES]; /* cuDNN's algorithm enum */
    int math[CONV_MAX_CANDIDATES]; /* the cudnnMathType_t to run it with */
    size_t ws[CONV_MAX_CANDIDATES]; /* workspace bytes */
    unsigned char dead[CONV_MAX_CANDIDATES];
};

/* Append a candidate unless the algorithm is listed already, the list is full or it asks
 * for more than ws_limit bytes of workspace (ws may be CONV_WS_UNKNOWN: then it is added,
 * and conv_algos_sized judges it later).  1 if added, else 0. */
static inline int conv_algos_add(struct conv_algos *a, int algo, int math, size_t ws,
                                 size_t ws_limit)
{
    for (int i = 0; i < a->count; i++)
        if (a->algo[i] == algo)
            return 0;
    if (a->count == CONV_MAX_CANDIDATES || (ws != CONV_WS_UNKNOWN && ws > ws_limit))
        return 0;
    a->algo[a->count] = algo;
    a->math[a->count] = math;
    a->ws[a->count] = ws;
    a->dead[a->count] = 0;
    a->count++;
    return 1;
}

/* candidate i's workspace, now known: ws bytes.  Above ws_limit the candidate is dead (as
 * conv_algos_add would not have listed it).  1 if it may run, else 0. */
static inline int conv_algos_sized(struct conv_algos *a, int i, size_t ws, size_t ws_limit)
{
    if (i < 0 || i >= a->count)
        return 0;
    a->ws[i] = ws;
    if (ws > ws_limit) {
        a->dead[i] = 1;
        return 0;
    }
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

/* cuDNN 9's status codes are category * 1000 + sub-code (cudnn_graph.h:
 * CUDNN_STATUS_FULL_ERROR_CODE); written as numbers here so this header needs no cuDNN —
 * conv_plan.c checks at compile time that they are cuDNN's.  A failed allocation of host
 * or device memory is a sub-code of CUDNN_STATUS_INTERNAL_ERROR (4000); the old
 * CUDNN_STATUS_ALLOC_FAILED is only the host one. */
#define CONV_CUDNN_HOST_ALLOCATION_FAILED 4003   /* ..._INTERNAL_ERROR_HOST_ALLOCATION_FAILED */
#define CONV_CUDNN_DEVICE_ALLOCATION_FAILED 4004 /* ..._INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED */

/* 1 when a candidate that failed with cuDNN status st (a cudnnStatus_t) should stay alive:
 * the run lacked host or device memory, which may be there next time.  Every other failure
 * (not supported in any sub-code, bad parameter, other internal or execution errors) is
 * the algorithm's for this shape: 0, dead for good. */
static inline int conv_status_transient(int st)
{
    return st == CONV_CUDNN_HOST_ALLOCATION_FAILED || st == CONV_CUDNN_DEVICE_ALLOCATION_FAILED;
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
