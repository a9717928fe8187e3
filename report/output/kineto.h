/* kineto.h — `ddpprof report --kineto`: every rank of every ddpprof run written as a
 * Kineto-shaped PyTorch profiler trace, so tools that read torch.profiler output (Holistic
 * Trace Analysis, the TensorBoard plugin, Perfetto, this report's own import) read ddpprof
 * runs too.  Per rank, OUT/kineto/RUN/HOST_RANK.pt.trace.json (tensorboard_trace_handler's
 * naming; every rank of a run under one host name, since the rows are already on rank 0's
 * clock) with schemaVersion, distributedInfo (backend, rank, world_size),
 * baseTimeNanoseconds, displayTimeUnit and traceEvents:
 *   - host ranges as CPU events on the lane's thread: ProfilerStep#N,
 *     DistributedDataParallel.forward, autograd::engine::evaluate_function (backward),
 *     Optimizer.step#, enumerate(DataLoader)#, and each bucket's all-reduce as
 *     record_param_comms (Collective name, In/Out msg nelems, dtype, Group size) around
 *     BACKEND:all_reduce; the other collectives likewise as record_param_comms around
 *     BACKEND:broadcast, BACKEND:all_gather, BACKEND:reduce_scatter, BACKEND:reduce,
 *     BACKEND:barrier (comm.allreduce rows, which no tool could tell from a bucket, as
 *     ddpprof.comm.allreduce with the same args, the calibration's as
 *     ddpprof.calib.allreduce; evaluation as ddpprof.eval: the import reads them back);
 *   - device-clock ranges (CUDA-event timing, and the host-staged buckets' ranges) as
 *     gpu_user_annotation ranges named as their phase's CPU event (a bucket's:
 *     BACKEND:all_reduce), which is what Kineto writes for a record_function's span over
 *     the device work, linked to that CPU event by its "External id" arg;
 *   - CUPTI rows as kernel / gpu_memcpy / gpu_memset events on their stream, copies under
 *     Kineto's names ("Memcpy HtoD", "Memset (Device)").  ddpprof does not record launches,
 *     so there are no cuda_runtime events or correlation ids: none are made up.
 * Slices that partly overlap on a lane (two buckets in flight) go to sub-lanes as the
 * timeline's (timeline_assign_lanes): CPU threads 100 apart, device streams 1000 apart.
 * CPU events come first in start order, then the device activity, as Kineto writes them.
 * The report of the export equals the report of the run, layer rows aside
 * (tests/test_report_export.sh). */
#ifndef DDPPROF_REPORT_KINETO_H
#define DDPPROF_REPORT_KINETO_H

#include "report/input/run.h"

/* Write the ddpprof runs of rs (imported ones are skipped) under out_dir/kineto/.
 * *files gets the number of files written.  Returns 0, or -1 after error_set(). */
int kineto_write(const struct runset *rs, const char *out_dir, int *files);

#endif
