/* kineto_gen.h — a synthetic Kineto trace (PyTorch profiler JSON) of any size, for
 * scripts/bench-report's import row: one rank of a DDP job whose steps look like a small
 * ResNet's under torch.profiler with record_shapes (per step about 1700 events: a forward of
 * 60 modules of nested aten ops with input shapes, each launching a kernel through
 * cudaLaunchKernel with an ac2g flow; a backward of 60 autograd evaluate_function ops with
 * children and two kernels each; three NCCL all-reduce buckets; a foreach optimizer), laid
 * out as Kineto writes it: header, the CPU events in start order, then the device activity
 * and runtime events. */
#ifndef DDPPROF_BENCH_KINETO_GEN_H
#define DDPPROF_BENCH_KINETO_GEN_H

#include <stdint.h>

/* Write path with about target_bytes of JSON (whole steps: at least one).  *steps gets the
 * number of steps written.  Returns 0, or -1 with a message on stderr. */
int kineto_gen(const char *path, uint64_t target_bytes, long *steps);

#endif
