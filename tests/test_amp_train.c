/* test_amp_train.c — AMP end to end through the real `ddpprof` binary:
 *  1. an inf injected into one rank's gradient (DDPPROF_FAULT_INF_STEP) skips that step on
 *     every rank, halves the scale, and leaves weights and optimizer state exactly as
 *     after the step before;
 *  2. fp16 training trains as fp32 does: over three seeds, the mean accuracy within 1 point
 *     and the mean loss of every 75-step window within 5 % (test_fp16_like_fp32 says why);
 *  3. a run resumed from its epoch-1 checkpoint ends bit-identical to one that never
 *     stopped, on 1 rank (fp32) and on 2 ranks (fp16 with the GradScaler).
 * Part 2 runs as its own ctest, test_amp_seeds (argument `seeds`). */
#include "io/safetensors.h"
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char tmp[1024];

static int run(const char *env, const char *out, const char *args)
{
    char cmd[8192];
    snprintf(cmd, sizeof cmd,
             "%s \"%s\" train --quiet --data /usr/share/datasets/fashion-mnist --seed 5 "
             "--threads 1 --timeout 60 --out \"%s/%s\" %s >\"%s/%s.log\" 2>&1",
             env, getenv("DDPPROF"), tmp, out, args, tmp, out);
    int rc = system(cmd);
    if (rc != 0) {
        snprintf(cmd, sizeof cmd, "cat \"%s/%s.log\" >&2", tmp, out);
        if (system(cmd)) {
        }
    }
    return rc;
}

/* column col of metrics.csv data row `row` (0-based) */
static double metric(const char *out, int row, const char *col)
{
    char dir[2048];
    snprintf(dir, sizeof dir, "%s/%s", tmp, out);
    struct test_csv *t = test_csv_read(dir, "metrics.csv");
    double v = NAN;
    if (t && row < t->nrows)
        v = strtod(test_csv_get(t, row, test_csv_col(t, col)), NULL);
    test_csv_free(t);
    return v;
}

static double meta_number(const char *out, const char *key)
{
    char path[2048], line[512];
    snprintf(path, sizeof path, "%s/%s/meta.csv", tmp, out);
    FILE *f = fopen(path, "r");
    double v = NAN;
    size_t k = strlen(key);
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, key, k) == 0 && line[k] == ',')
            v = strtod(line + k + 1, NULL);
    if (f)
        fclose(f);
    return v;
}

static struct st_file *ckpt(const char *out)
{
    char path[2048];
    snprintf(path, sizeof path, "%s/%s/checkpoint.safetensors", tmp, out);
    return st_open(path);
}

static void test_inf_skips_step(void)
{
    /* 2 ranks x batch 16: 96 samples = 3 steps, 64 = 2 steps */
    const char *args = "--cpu 2 --mode ddp --amp fp16 --batch-size 16 --epochs 1 --test-limit 32 "
                       "--lr 0.05 --momentum 0.9 --loss-scale-init 1024 --no-shuffle";
    char a[512], b[512];
    snprintf(a, sizeof a, "%s --limit 96", args);
    snprintf(b, sizeof b, "%s --limit 64", args);
    CHECK(run("DDPPROF_FAULT_INF_STEP=1:3", "inf", a) == 0, "run with an inf at step 3");
    CHECK(run("", "two", b) == 0, "run of the first 2 steps");
    for (int s = 0; s < 3; s++) {
        CHECK(metric("inf", s, "loss_scale") == 1024.0, "step %d ran at scale 1024, got %g",
              s + 1, metric("inf", s, "loss_scale"));
        CHECK(metric("inf", s, "found_inf") == (s == 2), "step %d found_inf = %g", s + 1,
              metric("inf", s, "found_inf"));
    }
    struct st_file *fa = ckpt("inf"), *fb = ckpt("two");
    CHECK(fa && fb, "checkpoints");
    if (!fa || !fb)
        return;
    const char *scale = st_metadata_get(fa, "scaler.scale");
    CHECK(scale && strcmp(scale, "512") == 0, "scale halved to 512, got %s", scale ? scale : "?");
    int compared = 0;
    for (int i = 0; i < st_count(fb); i++) {
        const struct st_tensor *tb = st_get(fb, i);
        /* BatchNorm running statistics do move in a skipped step's forward, as in PyTorch;
         * the parameters and the momentum buffers must not */
        if (strstr(tb->name, "running_") || strstr(tb->name, "num_batches"))
            continue;
        const struct st_tensor *ta = st_find(fa, tb->name);
        CHECK(ta && ta->nbytes == tb->nbytes && memcmp(ta->data, tb->data, ta->nbytes) == 0,
              "%s changed in the skipped step", tb->name);
        compared++;
    }
    CHECK(compared == 20, "compared %d parameters and momentum buffers, want 10 + 10", compared);
    st_close(fa);
    st_close(fb);
}

/* mean loss of metrics.csv's rows [lo, hi) */
static double mean_loss(const char *out, int lo, int hi)
{
    char dir[2048];
    snprintf(dir, sizeof dir, "%s/%s", tmp, out);
    struct test_csv *t = test_csv_read(dir, "metrics.csv");
    double sum = 0.0;
    int n = 0, c = t ? test_csv_col(t, "loss") : -1;
    for (int r = lo; c >= 0 && r < hi && r < t->nrows; r++, n++)
        sum += strtod(test_csv_get(t, r, c), NULL);
    test_csv_free(t);
    return n == hi - lo ? sum / n : NAN;
}

/* AMP's promise: fp16 autocast with the GradScaler trains as fp32 does, to within the
 * noise of training itself.  One seed's accuracy is one draw of that noise (a Zen 4 once
 * gave fp16 1.02 points below fp32 at the seed this test used), so the comparison is over
 * three seeds (11-13) of 375 steps each: the mean final accuracy, and the mean loss of each
 * 75-step window, fp16 against fp32.  The bands come from seeds 1-8, measured on an AMD
 * EPYC Zen 1 (AVX2; dev/rounding_20261207/amp_seeds.sh, results/rounding_20261207): per
 * seed, fp16 minus fp32 accuracy -0.55 to +0.28 points (sd 0.29), and window losses -2.9
 * to +4.3 % (sd 1.5 %), with no sign of a bias; over three seeds the sd is ~0.17 points and
 * ~0.9 %, so
 * 1 point and 5 % are over 3 and 5 sd even at the Zen 4's larger spread.  A step the
 * scaler skips for no reason, a wrong unscale or a cast in the wrong place moves the loss
 * by far more (test_amp checks the arithmetic itself). */
static void test_fp16_like_fp32(void)
{
    const char *args = "--cpu 1 --mode baseline --batch-size 32 --epochs 1 --limit 12000 "
                       "--lr 0.01 --momentum 0.9";
    enum { SEEDS = 3, STEPS = 375, WIN = 75 };
    double acc[2] = {0, 0}, win[2][STEPS / WIN] = {{0}};
    for (int s = 0; s < SEEDS; s++)
        for (int p = 0; p < 2; p++) {
            char a[512], out[64];
            snprintf(out, sizeof out, "%s%d", p ? "fp16-" : "fp32-", 11 + s);
            snprintf(a, sizeof a, "%s --amp %s --seed %d", args, p ? "fp16" : "off", 11 + s);
            CHECK(run("", out, a) == 0, "%s run", out);
            const double v = meta_number(out, "final_accuracy");
            CHECK(v > 0.7, "%s trains (accuracy %.4f)", out, v);
            acc[p] += v / SEEDS;
            for (int w = 0; w < STEPS / WIN; w++)
                win[p][w] += mean_loss(out, w * WIN, (w + 1) * WIN) / SEEDS;
        }
    printf("over seeds 11-13, 375 steps: accuracy fp32 %.2f%%, fp16 %.2f%%; loss by 75-step "
           "window, fp16 against fp32:",
           100 * acc[0], 100 * acc[1]);
    for (int w = 0; w < STEPS / WIN; w++)
        printf(" %+.2f%%", 100 * (win[1][w] - win[0][w]) / win[0][w]);
    printf("\n");
    CHECK(fabs(acc[1] - acc[0]) <= 0.01, "fp16's mean accuracy %.4f vs fp32's %.4f: more than "
          "1 point apart", acc[1], acc[0]);
    for (int w = 0; w < STEPS / WIN; w++)
        CHECK(fabs(win[1][w] - win[0][w]) <= 0.05 * win[0][w],
              "steps %d-%d: fp16's mean loss %.4f vs fp32's %.4f: more than 5 %% apart",
              w * WIN + 1, (w + 1) * WIN, win[1][w], win[0][w]);
}

static int files_equal(const char *x, const char *y)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "cmp -s \"%s/%s/checkpoint.safetensors\" \"%s/%s/checkpoint.safetensors\"",
             tmp, x, tmp, y);
    return system(cmd) == 0;
}

static void test_resume(const char *name, const char *args)
{
    char full[64], part[64], a3[512], a1[512], ar[4096];
    snprintf(full, sizeof full, "%s-full", name);
    snprintf(part, sizeof part, "%s-part", name);
    snprintf(a3, sizeof a3, "%s --epochs 3", args);
    snprintf(a1, sizeof a1, "%s --epochs 1", args);
    CHECK(run("", full, a3) == 0, "%s: 3 epochs straight", name);
    CHECK(run("", part, a1) == 0, "%s: epoch 1", name);
    char ck[2048];
    snprintf(ck, sizeof ck, "%s/%s/checkpoint.safetensors", tmp, part);
    CHECK(!files_equal(full, part), "%s: 1 epoch differs from 3 (the comparison can fail)", name);
    /* into the same run directory, which holds epoch 1's files: --overwrite */
    snprintf(ar, sizeof ar, "%s --epochs 3 --overwrite --resume \"%s\"", args, ck);
    CHECK(run("", part, ar) == 0, "%s: resumed for epochs 2-3", name);
    CHECK(files_equal(full, part), "%s: resumed run's checkpoint is not bit-identical", name);
    CHECK(metric(part, 0, "step") == 31.0, "%s: resumed run continues at step 31 (got %g)",
          name, metric(part, 0, "step"));
}

int main(int argc, char **argv)
{
    char *d = test_tmpdir();
    snprintf(tmp, sizeof tmp, "%s", d);
    free(d);
    /* `seeds`: part 2 alone (ctest test_amp_seeds: six runs of 375 steps, a numerics check
     * CI's sanitizer stage leaves out); else parts 1 and 3 */
    if (argc > 1 && strcmp(argv[1], "seeds") == 0) {
        test_fp16_like_fp32();
        if (test_failed == 0) {
            char cmd[2048];
            snprintf(cmd, sizeof cmd, "rm -rf \"%s\"", tmp);
            if (system(cmd)) {
            }
        }
        return test_finish();
    }
    test_inf_skips_step();
    /* 960 samples: 30 steps per epoch at global batch 32 */
    test_resume("one", "--cpu 1 --mode baseline --batch-size 32 --limit 960 --test-limit 64 "
                       "--lr 0.02 --momentum 0.9");
    test_resume("two", "--cpu 2 --mode ddp --amp fp16 --batch-size 16 --limit 960 "
                       "--test-limit 64 --lr 0.02 --momentum 0.9 --loss-scale-interval 7");
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "rm -rf \"%s\"", tmp);
    if (test_failed == 0 && system(cmd)) {
    }
    return test_finish();
}
