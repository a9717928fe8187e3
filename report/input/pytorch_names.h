/* pytorch_names.h — the names PyTorch's profiler gives the parts of a training step, read
 * by the Kineto and the legacy importers alike (report/input/import_pytorch.c): which op,
 * annotation or kernel is a step, a phase or a collective (and which collective).  The rules are
 * tables in pytorch_names.c; a new name PyTorch writes is one line there
 * (report/FORMULAS.md "Imported PyTorch traces" lists them). */
#ifndef DDPPROF_REPORT_PYTORCH_NAMES_H
#define DDPPROF_REPORT_PYTORCH_NAMES_H

#include <stddef.h>
#include <stdint.h>

#include "report/input/import_core.h"

/* torch.profiler's step annotation: "ProfilerStep#N" */
#define PT_STEP_PREFIX "ProfilerStep#"

/* What a host op (cpu_op, user_annotation, a legacy event; device_span 0) or a
 * gpu_user_annotation range (device_span 1) named name[0..len) is: 1 with *kind and *coll
 * set (IMPORT_COLL_NONE but for IMPORT_COLL and IMPORT_PARAMS), 0 when no rule names it, -1
 * when a rule names it as nothing to import (record_param_comms whose coll_arg, its
 * "Collective name" arg, "" when absent, names no collective known here).  Collectives:
 * BACKEND:all_reduce (all-reduce), record_param_comms (its arg's), BACKEND:WORD (gloo:
 * broadcast, nccl:_allgather_base, ...) and the op that issued one, c10d::WORD
 * (IMPORT_ISSUE).  A step's number is pt_name_step's. */
int pt_name_span(const char *name, size_t len, const char *coll_arg, int device_span,
                 enum import_kind *kind, enum import_coll *coll);

/* "ProfilerStep#N" with N a number in 0..1e9: 1 with *n set, else 0. */
int pt_name_step(const char *name, size_t len, int64_t *n);

/* A device kernel named name[0..len): 1 when it is NCCL's (any "nccl" in the name, any case),
 * with *coll its collective (IMPORT_COLL_NONE when neither its name nor coll_arg, its
 * "Collective name" arg, says: an all-reduce by the name's AllReduce or the arg, else the
 * word after the scheme, ncclKernel_Broadcast_..., else the arg's word) and *known 1 when
 * the name follows one of NCCL's schemes (ncclKernel_*, ncclDevKernel_*); 0 for any other
 * kernel. */
int pt_name_kernel(const char *name, size_t len, const char *coll_arg, enum import_coll *coll,
                   int *known);

/* Bytes per element of a collective's "dtype" arg ("Float", "BFloat16", ...), 0 when unknown. */
int64_t pt_dtype_bytes(const char *dtype);

#endif
