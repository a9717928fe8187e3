/* train_layers.h — per-layer tracing of one rank's run (--trace full): the model's layers
 * as probe ranges (layer.forward / layer.backward rows, probes/TRACE.md), their costs and
 * the machine's measured peak in meta.csv (report/FORMULAS.md "Per layer"). */
#ifndef DDPPROF_TRAIN_LAYERS_H
#define DDPPROF_TRAIN_LAYERS_H

struct rank;

/* Start recording the model's layers for one training step (forward and backward): a
 * no-op unless the run traces in full mode.  rank_layers_stop after the backward. */
void rank_layers_start(struct rank *r);
void rank_layers_stop(struct rank *r);

/* meta.csv (rank 0; full mode only): layers, layer.K.* (name, type, param_bytes,
 * flops_forward, flops_backward, bytes_forward, bytes_backward at the run's per-rank batch),
 * param.I.name / param.I.bytes, and peak_gflops, peak_gbps, peak_source measured now on
 * this rank's device (peak_bench.h) */
void rank_layers_meta(struct rank *r);

#endif
