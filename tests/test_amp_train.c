/* test_amp_train.c — AMP end to end through the real `ddpprof` binary:
 *  1. an inf injected into one rank's gradient (DDPPROF_FAULT_INF_STEP) skips that step on
 *     every rank, halves the scale, and leaves weights and optimizer state exactly as
 *     after the step before;
 *  2. fp16 training reaches an accuracy within 1 point of fp32 at the same seed and steps;
 *  3. a run resumed from its epoch-1 checkpoint ends bit-identical to one that never
 *     stopped, on 1 rank (fp32) and on 2 ranks (fp16 with the GradScaler). */
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

static void test_fp16_accuracy(void)
{
    const char *args = "--cpu 1 --mode baseline --batch-size 32 --epochs 1 --limit 12000 "
                       "--lr 0.01 --momentum 0.9";
    char a[512], b[512];
    snprintf(a, sizeof a, "%s --amp off", args);
    snprintf(b, sizeof b, "%s --amp fp16", args);
    CHECK(run("", "fp32", a) == 0 && run("", "fp16", b) == 0, "fp32 and fp16 runs");
    double a32 = meta_number("fp32", "final_accuracy"), a16 = meta_number("fp16", "final_accuracy");
    printf("accuracy after 375 steps: fp32 %.2f%%, fp16 %.2f%%\n", 100 * a32, 100 * a16);
    CHECK(a32 > 0.7, "fp32 trains (%.4f)", a32);
    CHECK(fabs(a32 - a16) <= 0.01, "fp16 accuracy %.4f vs fp32 %.4f: more than 1 point apart",
          a16, a32);
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

int main(void)
{
    char *d = test_tmpdir();
    snprintf(tmp, sizeof tmp, "%s", d);
    free(d);
    test_inf_skips_step();
    test_fp16_accuracy();
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
