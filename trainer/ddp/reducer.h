/* reducer.h — DDP's gradient reducer, as PyTorch's Reducer.
 *
 * Gradients are assigned to buckets in reverse parameter order (the order backward
 * produces them): the first bucket closes at first_cap_bytes (1 MiB in PyTorch), the rest
 * at cap_bytes (--bucket-cap-mb, 25 MiB by default): common/ddp_buckets.h, the rule the
 * predictor forms buckets with too.  A bucket is a view of the parameter table's flat
 * gradient buffer (params.h; PyTorch's gradient_as_bucket_view): the gradients are written
 * there by backward, nothing is copied in or out.  When a bucket's last gradient arrives
 * it is divided by the world size (one operation over the bucket) and its all-reduce is
 * launched asynchronously, in bucket order, so it overlaps the rest of backward.
 * reducer_finish waits for every bucket; the averaged gradients are then the parameters'
 * grads, ready for the optimizer step. */
#ifndef DDPPROF_REDUCER_H
#define DDPPROF_REDUCER_H

#include "nn/layer.h"
#include "nn/params.h"

#include <stddef.h>

struct comm;
struct comm_span;
struct reducer;

/* Observer for the probes, called on the rank's thread: launching right before a
 * bucket's all-reduce is issued (after the comm's order slot, where it has one, made the
 * comm's stream wait for the gradients queued so far, so a start event recorded there
 * times the all-reduce and not the rest of backward), issued right after, finished when
 * its wait returned with when the transport ran it (span zero where the transport cannot
 * tell from the host).  Any may be NULL. */
struct reducer_observer {
    void (*launching)(void *ctx, int bucket, size_t bytes);
    void (*issued)(void *ctx, int bucket);
    void (*finished)(void *ctx, int bucket, size_t bytes, const struct comm_span *span);
    void *ctx;
};

/* Packs params (params_pack).  NULL + error_set on failure.  params and comm must
 * outlive the reducer. */
struct reducer *reducer_create(struct param_table *params, struct comm *comm,
                               size_t first_cap_bytes, size_t cap_bytes);

/* The hook to pass to model->backward. */
struct grad_hook reducer_hook(struct reducer *r);

void reducer_set_observer(struct reducer *r, struct reducer_observer obs);

/* Wait for every bucket: the parameters' grads are then the averaged gradients; 0 or -1
 * (error_set).  Every bucket must have been launched (every parameter's gradient
 * reported). */
int reducer_finish(struct reducer *r);

int reducer_bucket_count(const struct reducer *r);
/* parameters and bytes in bucket b (the bytes of its range of the flat gradients: the
 * gradients', and the gaps between entries that params.h aligns, if any) */
void reducer_bucket_info(const struct reducer *r, int b, int *params, size_t *bytes);

void reducer_destroy(struct reducer *r);

/* The most bytes one broadcast of ddp_broadcast_state carries: PyTorch's
 * _sync_module_states broadcasts the module's states coalesced in buckets of 250 MB
 * (broadcast_bucket_size, _broadcast_coalesced). */
#define DDP_BROADCAST_BUCKET_BYTES ((size_t)250 << 20)

/* Broadcast every parameter and buffer (counters too, as the 2 f32 words of their int64)
 * from rank 0, as DDP does at start: packed in state_dict order into buckets of at most
 * DDP_BROADCAST_BUCKET_BYTES (one for the ConvNet and ResNet18, which took one broadcast per
 * tensor), each one broadcast, then unpacked.  Returns 0, or -1 after error_set(). */
int ddp_broadcast_state(struct param_table *params, struct comm *comm);

#endif
