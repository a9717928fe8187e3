/* test_ddp_equivalence.c — DDP on N CPU ranks equals one process at N times the batch.
 *
 * From the same initial weights (--init, a PyTorch state_dict) and the same global sample
 * order, N ranks at batch b with SyncBatchNorm must give the same per-step losses and the
 * same final weights as 1 rank at batch N*b: the DistributedSampler hands step k's global
 * batch out across the ranks, SyncBatchNorm normalises with the global statistics, and the
 * bucket all-reduce averages the gradients.  Checked for N = 2 and 3, with one bucket and
 * with several, by running the real `ddpprof` binary. */
#include "io/safetensors.h"
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_STEPS 64

static char tmp[1024];

static int run(const char *out, const char *args)
{
    char cmd[8192];
    snprintf(cmd, sizeof cmd,
             "\"%s\" train --quiet --data /usr/share/datasets/fashion-mnist --limit 240 "
             "--test-limit 48 --epochs 1 --lr 0.01 --momentum 0.9 --weight-decay 1e-4 "
             "--seed 3 --threads 1 --timeout 60 --amp off "
             "--init \"%s/tests/golden/convnet_init.safetensors\" --out \"%s/%s\" %s "
             ">\"%s/%s.log\" 2>&1",
             getenv("DDPPROF"), test_source_dir(), tmp, out, args, tmp, out);
    int rc = system(cmd);
    if (rc != 0) {
        char log[2048];
        snprintf(log, sizeof log, "cat \"%s/%s.log\" >&2", tmp, out);
        if (system(log)) {
        }
    }
    return rc;
}

/* the loss column of metrics.csv, its rows with a number there */
static int read_losses(const char *out, double *loss)
{
    char dir[2048];
    snprintf(dir, sizeof dir, "%s/%s", tmp, out);
    struct test_csv *t = test_csv_read(dir, "metrics.csv");
    if (!t)
        return 0;
    int n = test_csv_doubles(t, "loss", loss, MAX_STEPS);
    test_csv_free(t);
    return n;
}

static void compare(const char *name, const char *ref, const char *ddp)
{
    double a[MAX_STEPS], b[MAX_STEPS];
    int na = read_losses(ref, a), nb = read_losses(ddp, b);
    /* 240 samples / global batch 24 = 10 steps */
    CHECK(na == 10 && nb == 10, "%s: %d and %d steps, want 10", name, na, nb);
    double worst = 0.0;
    for (int i = 0; i < na && i < nb; i++)
        worst = fmax(worst, fabs(a[i] - b[i]) / fabs(a[i]));
    /* fp32 with sums in another order (per-rank partial sums, then the all-reduce): a few
     * ulps per step (measured 2e-7 over 10 steps; SGD on batches of 24 amplifies such
     * noise about 1.6x per step later on, hence the short run) */
    CHECK(worst < 1e-5, "%s: losses differ by %.3g relative", name, worst);

    char pa[2048], pb[2048];
    snprintf(pa, sizeof pa, "%s/%s/checkpoint.safetensors", tmp, ref);
    snprintf(pb, sizeof pb, "%s/%s/checkpoint.safetensors", tmp, ddp);
    struct st_file *fa = st_open(pa), *fb = st_open(pb);
    CHECK(fa && fb, "%s: checkpoints readable", name);
    if (!fa || !fb) {
        st_close(fa);
        st_close(fb);
        return;
    }
    int tensors = 0;
    double werr = 0.0;
    for (int i = 0; i < st_count(fa); i++) {
        const struct st_tensor *ta = st_get(fa, i);
        const struct st_tensor *tb = st_find(fb, ta->name);
        CHECK(tb && tb->nbytes == ta->nbytes, "%s: tensor %s in both", name, ta->name);
        if (!tb || tb->nbytes != ta->nbytes)
            continue;
        tensors++;
        if (ta->dtype == ST_I64) {
            CHECK(memcmp(ta->data, tb->data, ta->nbytes) == 0, "%s: %s equal", name, ta->name);
            continue;
        }
        /* Momentum buffers are skipped: a conv bias followed by BatchNorm has a gradient
         * that is zero up to rounding, so its buffer is pure fp32 noise; the weights that
         * buffer moves are compared below. */
        if (strncmp(ta->name, "optimizer.", 10) == 0)
            continue;
        const float *x = ta->data, *y = tb->data;
        double diff = 0.0, scale = 0.0;
        for (int64_t k = 0; k < ta->numel; k++) {
            diff = fmax(diff, fabs((double)x[k] - y[k]));
            scale = fmax(scale, fabs((double)x[k]));
        }
        werr = fmax(werr, diff / scale);
    }
    /* max |a-b| over max |a| per tensor: fp32 rounding carried through 10 steps is a few
     * 1e-7 (measured); a wrong bucket, scale or SyncBatchNorm statistic is >1e-3 */
    CHECK(werr < 1e-5, "%s: weights differ by %.3g of their magnitude", name, werr);
    CHECK(tensors == st_count(fa) && tensors == st_count(fb), "%s: same tensors", name);
    printf("%-28s max loss diff %.2e, max weight diff %.2e\n", name, worst, werr);
    st_close(fa);
    st_close(fb);
}

int main(void)
{
    char *d = test_tmpdir();
    snprintf(tmp, sizeof tmp, "%s", d);
    free(d);
    CHECK(run("ref", "--cpu 1 --mode baseline --batch-size 24") == 0, "baseline run");
    CHECK(run("ddp2", "--cpu 2 --mode ddp --batch-size 12") == 0, "2 ranks, one bucket");
    CHECK(run("ddp2b", "--cpu 2 --mode ddp --batch-size 12 --bucket-cap-mb 0.01") == 0,
          "2 ranks, several buckets");
    /* 3 ranks on the 2 cores of CI: --oversubscribe (the result, not the speed, is tested) */
    CHECK(run("ddp3b",
              "--cpu 3 --oversubscribe --mode ddp --batch-size 8 --bucket-cap-mb 0.02") == 0,
          "3 ranks, several buckets");
    compare("2 ranks, 1 bucket", "ref", "ddp2");
    compare("2 ranks, several buckets", "ref", "ddp2b");
    compare("3 ranks, several buckets", "ref", "ddp3b");

    char cmd[2048];
    snprintf(cmd, sizeof cmd, "grep -q '^buckets,[2-9]' \"%s/ddp2b/meta.csv\"", tmp);
    CHECK(system(cmd) == 0, "--bucket-cap-mb 0.01 made several buckets (meta.csv buckets)");
    snprintf(cmd, sizeof cmd, "grep -q '^buckets,1$' \"%s/ddp2/meta.csv\"", tmp);
    CHECK(system(cmd) == 0, "default cap keeps the ConvNet in one bucket");
    snprintf(cmd, sizeof cmd, "rm -rf \"%s\"", tmp);
    if (test_failed == 0 && system(cmd)) {
    }
    return test_finish();
}
