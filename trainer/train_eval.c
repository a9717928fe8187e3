/* train_eval.c — the test set on one rank (train_rank.h): accuracy and mean loss per
 * sample; in DDP each rank evaluates its DistributedSampler share and (size, correct, loss
 * sum) are reduced to rank 0, as the tutorial does for the accuracy.  And the warning for
 * a val loss that AMP's half-precision forward made nan or inf. */
#include "train_rank.h"

#include "comm/comm.h"
#include "common/error.h"
#include "data/sampler.h"

#include <math.h>
#include <stdio.h>

/* accuracy and mean loss per sample on the test set; in DDP each rank evaluates its
 * DistributedSampler share and (size, correct, loss sum) are reduced to rank 0, as the
 * tutorial does for the accuracy */
int rank_evaluate(struct rank *r, double *accuracy, double *mean_loss)
{
    const struct train_opts *o = r->o;
    struct backend *be = r->dev.be;
    struct sampler s;
    if (sampler_init(&s, r->test.n, r->world, r->rank, 0, 0, 0) ||
        sampler_indices(&s, r->batch.indices))
        return -1;
    int64_t count = sampler_num_samples(&s);
    long correct = 0;
    double loss_sum = 0.0;
    for (int64_t at = 0; at < count; at += o->data.batch_size) {
        int n = (int)(count - at < o->data.batch_size ? count - at : o->data.batch_size);
        const float *logits;
        if (rank_load_batch(r, &r->test, r->batch.indices + at, n) ||
            r->m->forward(r->m, r->batch.x_dev, n, 0, &logits))
            return error_wrap("evaluation");
        correct += be->count_correct(be, n, r->m->classes, logits, r->batch.y_dev);
        loss_sum +=
            (double)n * be->softmax_xent(be, n, r->m->classes, logits, r->batch.y_dev, NULL);
    }
    float tally[3] = {(float)count, (float)correct, (float)loss_sum};
    struct comm *comm = r->coll;
    if (comm) {
        be->upload(be, r->batch.scalars, tally, sizeof tally);
        if (comm->reduce(comm, r->batch.scalars, 3, COMM_F32, 0))
            return error_wrap("reducing the test accuracy");
        be->download(be, tally, r->batch.scalars, sizeof tally);
    }
    *accuracy = tally[0] > 0 ? (double)tally[1] / (double)tally[0] : 0.0;
    *mean_loss = tally[0] > 0 ? (double)tally[2] / (double)tally[0] : 0.0;
    return 0;
}

/* A val loss of nan or inf under AMP: the evaluation's half-precision forward overflowed
 * (fp16 holds at most 65504) or met a nan; the GradScaler guards the training steps only,
 * so nothing stopped it.  One warning line on stderr naming the cause and the way out. */
void rank_warn_val_loss(const struct rank *r, int epoch, double val_loss)
{
    const int f16 = r->o->amp.dtype == AMP_F16;
    fprintf(stderr,
            "ddpprof: warning: epoch %d's val loss is %s under --amp %s: the evaluation's %s "
            "forward %s, and the GradScaler guards only the training steps (it skipped %lld "
            "of this epoch's %lld for inf/nan gradients); the weights outgrew %s: lower --lr%s\n",
            epoch + 1, isnan(val_loss) ? "nan" : "inf", f16 ? "fp16" : "bf16",
            f16 ? "fp16" : "bf16",
            f16 ? "overflowed (a value above fp16's 65504 became inf)" : "met an inf or nan",
            r->epoch_skipped, r->epoch_steps, f16 ? "fp16" : "bf16",
            f16 ? ", or use --amp bf16 (fp32's range)" : "");
}
