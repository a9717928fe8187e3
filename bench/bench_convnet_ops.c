/* bench_convnet_ops.c — where a ConvNet training step's time goes on the CPU backend: every
 * backend op of one step of the seed's ConvNet (batch 32, fp32), in the order nn/convnet.c
 * runs them, timed alone, for the reference kernels and the fast ones side by side
 * (backend_cpu_create_path).
 *
 * usage: bench_convnet_ops [THREADS [BATCH [ROUNDS]]]   (defaults 1, 32, 30)
 * Prints one row per op: the best time of ROUNDS rounds (the figure least disturbed by
 * other processes on a shared machine) in microseconds, per backend, and each op's GFLOP/s
 * where it has FLOPs (direct-convolution FLOPs, multiply-add = 2).  The two backends are
 * timed interleaved, round by round.  A benchmark: it prints, asserts nothing. */
#include "backend/backend.h"
#include "backend/backend_cpu.h"
#include "common/clock.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* the ConvNet's tensors for one step, on one backend */
struct net {
    struct backend *be;
    int n;
    float count1, count2; /* batch norm's element counts per channel (host = CPU memory) */
    struct conv2d_shape cs1, cs2;
    struct pool2d_shape ps1, ps2;
    float *x, *w1, *b1, *w2, *b2, *wf, *bf;
    float *c1, *a1, *p1, *c2, *a2, *p2, *logits, *dlogits;
    float *g_big, *g_big2, *dw1, *db1, *dw2, *db2, *dwf, *dbf, *mean, *invstd, *sums;
    float *bnw, *bnb, *dbnw, *dbnb, *rm, *rv;
    int32_t *arg1, *arg2, *labels;
};

static float *fill(size_t n, unsigned *seed, float lo, float hi)
{
    float *p = aligned_alloc(64, (n * sizeof(float) + 63) & ~(size_t)63);
    if (!p) {
        fprintf(stderr, "bench_convnet_ops: out of memory\n");
        exit(1);
    }
    for (size_t i = 0; i < n; i++) {
        *seed = *seed * 1103515245u + 12345u;
        p[i] = lo + (hi - lo) * (float)((*seed >> 8) & 0xffff) / 65535.0f;
    }
    return p;
}

static void net_init(struct net *t, struct backend *be, int n)
{
    t->count1 = (float)n * 784;
    t->count2 = (float)n * 196;
    unsigned seed = 7;
    t->be = be;
    t->n = n;
    t->cs1 = (struct conv2d_shape){.n = n, .c = 1, .h = 28, .w = 28, .k = 16, .r = 5, .s = 5,
                                   .pad = 2, .stride = 1};
    t->cs2 = (struct conv2d_shape){.n = n, .c = 16, .h = 14, .w = 14, .k = 32, .r = 5, .s = 5,
                                   .pad = 2, .stride = 1};
    conv2d_shape_init(&t->cs1);
    conv2d_shape_init(&t->cs2);
    t->ps1 = (struct pool2d_shape){.n = n, .c = 16, .h = 28, .w = 28, .kernel = 2, .stride = 2};
    t->ps2 = (struct pool2d_shape){.n = n, .c = 32, .h = 14, .w = 14, .kernel = 2, .stride = 2};
    pool2d_shape_init(&t->ps1);
    pool2d_shape_init(&t->ps2);
    const size_t big = (size_t)n * 16 * 784, mid = (size_t)n * 32 * 196;
    t->x = fill((size_t)n * 784, &seed, 0.0f, 1.0f);
    t->w1 = fill(400, &seed, -0.2f, 0.2f);
    t->b1 = fill(16, &seed, -0.2f, 0.2f);
    t->w2 = fill(12800, &seed, -0.05f, 0.05f);
    t->b2 = fill(32, &seed, -0.05f, 0.05f);
    t->wf = fill(15680, &seed, -0.02f, 0.02f);
    t->bf = fill(10, &seed, -0.02f, 0.02f);
    t->c1 = fill(big, &seed, -1, 1);
    t->a1 = fill(big, &seed, -1, 1);
    t->p1 = fill(big / 4, &seed, -1, 1);
    t->c2 = fill(mid, &seed, -1, 1);
    t->a2 = fill(mid, &seed, -1, 1);
    t->p2 = fill(mid / 4, &seed, -1, 1);
    t->logits = fill((size_t)n * 10, &seed, -1, 1);
    t->dlogits = fill((size_t)n * 10, &seed, -1, 1);
    t->g_big = fill(big, &seed, -1, 1);
    t->g_big2 = fill(big, &seed, -1, 1);
    t->dw1 = fill(400, &seed, 0, 0);
    t->db1 = fill(16, &seed, 0, 0);
    t->dw2 = fill(12800, &seed, 0, 0);
    t->db2 = fill(32, &seed, 0, 0);
    t->dwf = fill(15680, &seed, 0, 0);
    t->dbf = fill(10, &seed, 0, 0);
    t->mean = fill(32, &seed, -0.1f, 0.1f);
    t->invstd = fill(32, &seed, 0.5f, 2.0f);
    t->sums = fill(64, &seed, -1, 1);
    t->bnw = fill(32, &seed, 0.5f, 1.5f);
    t->bnb = fill(32, &seed, -0.5f, 0.5f);
    t->dbnw = fill(32, &seed, 0, 0);
    t->dbnb = fill(32, &seed, 0, 0);
    t->rm = fill(32, &seed, -0.1f, 0.1f);
    t->rv = fill(32, &seed, 0.5f, 2.0f);
    t->arg1 = calloc(big / 4, sizeof(int32_t));
    t->arg2 = calloc(mid / 4, sizeof(int32_t));
    t->labels = calloc((size_t)n, sizeof(int32_t));
    if (!t->arg1 || !t->arg2 || !t->labels) {
        fprintf(stderr, "bench_convnet_ops: out of memory\n");
        exit(1);
    }
    for (int i = 0; i < n; i++)
        t->labels[i] = i % 10;
    /* valid argmax indices: run the pools once */
    be->maxpool2d_forward(be, &t->ps1, DT_F32, t->a1, t->p1, t->arg1);
    be->maxpool2d_forward(be, &t->ps2, DT_F32, t->a2, t->p2, t->arg2);
}

/* one op of the step */
struct op {
    const char *name;
    double flops; /* per call, 0: none counted */
    void (*run)(struct net *t);
};

#define BIG(t) ((size_t)(t)->n * 16 * 784)
#define MID(t) ((size_t)(t)->n * 32 * 196)

static void op_conv1_fwd(struct net *t)
{
    t->be->conv2d_forward(t->be, &t->cs1, DT_F32, t->x, t->w1, t->b1, t->c1);
}
static void op_bn1_stats(struct net *t)
{
    t->be->batchnorm_stats(t->be, t->n, 16, 784, DT_F32, t->c1, 1e-5f, t->mean, t->invstd);
}
static void op_bn1_elemt(struct net *t)
{
    t->be->batchnorm_elemt(t->be, t->n, 16, 784, DT_F32, t->c1, t->mean, t->invstd, t->bnw,
                           t->bnb, t->a1);
}
/* the ConvNet runs each ReLU after its max pooling (nn/convnet.c), on the pooled values */
static void op_relu1(struct net *t) { t->be->relu_forward(t->be, BIG(t) / 4, DT_F32, t->p1, t->p1); }
static void op_pool1(struct net *t)
{
    t->be->maxpool2d_forward(t->be, &t->ps1, DT_F32, t->a1, t->p1, t->arg1);
}
static void op_conv2_fwd(struct net *t)
{
    t->be->conv2d_forward(t->be, &t->cs2, DT_F32, t->p1, t->w2, t->b2, t->c2);
}
static void op_bn2_stats(struct net *t)
{
    t->be->batchnorm_stats(t->be, t->n, 32, 196, DT_F32, t->c2, 1e-5f, t->mean, t->invstd);
}
static void op_bn2_elemt(struct net *t)
{
    t->be->batchnorm_elemt(t->be, t->n, 32, 196, DT_F32, t->c2, t->mean, t->invstd, t->bnw,
                           t->bnb, t->a2);
}
static void op_relu2(struct net *t) { t->be->relu_forward(t->be, MID(t) / 4, DT_F32, t->p2, t->p2); }
static void op_pool2(struct net *t)
{
    t->be->maxpool2d_forward(t->be, &t->ps2, DT_F32, t->a2, t->p2, t->arg2);
}
static void op_fc_fwd(struct net *t)
{
    t->be->linear_forward(t->be, t->n, 1568, 10, DT_F32, t->p2, t->wf, t->bf, t->logits);
}
static void op_xent(struct net *t)
{
    t->be->softmax_xent(t->be, t->n, 10, t->logits, t->labels, t->dlogits);
}
static void op_fc_bwd(struct net *t)
{
    t->be->linear_backward(t->be, t->n, 1568, 10, DT_F32, t->p2, t->wf, t->dlogits, t->g_big2,
                           t->dwf, t->dbf);
}
static void op_pool2_bwd(struct net *t)
{
    t->be->maxpool2d_backward(t->be, &t->ps2, DT_F32, t->g_big2, t->arg2, t->g_big);
}
static void op_relu2_bwd(struct net *t)
{
    t->be->relu_backward(t->be, MID(t) / 4, DT_F32, t->p2, t->g_big2, t->g_big2);
}
static void op_bn2_reduce(struct net *t)
{
    t->be->batchnorm_backward_reduce(t->be, t->n, 32, 196, DT_F32, t->g_big, t->c2, t->mean,
                                     t->invstd, t->sums, t->sums + 32, t->dbnw, t->dbnb);
}
static void op_bn2_bwd_elemt(struct net *t)
{
    t->be->batchnorm_backward_elemt(t->be, t->n, 32, 196, DT_F32, t->g_big, t->c2, t->mean,
                                    t->invstd, t->bnw, t->sums, t->sums + 32,
                                    &t->count2, t->g_big);
}
static void op_conv2_bwd(struct net *t)
{
    t->be->conv2d_backward(t->be, &t->cs2, DT_F32, t->p1, t->w2, t->g_big, t->g_big2, t->dw2,
                           t->db2);
}
static void op_pool1_bwd(struct net *t)
{
    t->be->maxpool2d_backward(t->be, &t->ps1, DT_F32, t->g_big2, t->arg1, t->g_big);
}
static void op_relu1_bwd(struct net *t)
{
    t->be->relu_backward(t->be, BIG(t) / 4, DT_F32, t->p1, t->g_big2, t->g_big2);
}
static void op_bn1_reduce(struct net *t)
{
    t->be->batchnorm_backward_reduce(t->be, t->n, 16, 784, DT_F32, t->g_big, t->c1, t->mean,
                                     t->invstd, t->sums, t->sums + 16, t->dbnw, t->dbnb);
}
static void op_bn1_bwd_elemt(struct net *t)
{
    t->be->batchnorm_backward_elemt(t->be, t->n, 16, 784, DT_F32, t->g_big, t->c1, t->mean,
                                    t->invstd, t->bnw, t->sums, t->sums + 16,
                                    &t->count1, t->g_big);
}
static void op_conv1_bwd(struct net *t)
{
    t->be->conv2d_backward(t->be, &t->cs1, DT_F32, t->x, t->w1, t->g_big, NULL, t->dw1, t->db1);
}
static void op_sgd(struct net *t)
{
    t->be->sgd_step(t->be, 12800, t->w2, t->dw2, NULL, 1e-9f, 0.0f, 0.0f, 0.0f, 0, 0);
    t->be->sgd_step(t->be, 15680, t->wf, t->dwf, NULL, 1e-9f, 0.0f, 0.0f, 0.0f, 0, 0);
}

/* FLOPs per image (multiply-add = 2) */
#define F_CONV1 627200.0
#define F_CONV2 5017600.0
#define F_FC 31360.0

static const struct op ops[] = {
    {"conv1 forward", F_CONV1, op_conv1_fwd},
    {"bn1 stats", 0, op_bn1_stats},
    {"bn1 elemt", 0, op_bn1_elemt},
    {"pool1", 0, op_pool1},
    {"relu1 (pooled)", 0, op_relu1},
    {"conv2 forward", F_CONV2, op_conv2_fwd},
    {"bn2 stats", 0, op_bn2_stats},
    {"bn2 elemt", 0, op_bn2_elemt},
    {"pool2", 0, op_pool2},
    {"relu2 (pooled)", 0, op_relu2},
    {"fc forward", F_FC, op_fc_fwd},
    {"softmax xent", 0, op_xent},
    {"fc backward", 2 * F_FC, op_fc_bwd},
    {"relu2 backward (pooled)", 0, op_relu2_bwd},
    {"pool2 backward", 0, op_pool2_bwd},
    {"bn2 backward reduce", 0, op_bn2_reduce},
    {"bn2 backward elemt", 0, op_bn2_bwd_elemt},
    {"conv2 backward dx dw db", 2 * F_CONV2, op_conv2_bwd},
    {"relu1 backward (pooled)", 0, op_relu1_bwd},
    {"pool1 backward", 0, op_pool1_bwd},
    {"bn1 backward reduce", 0, op_bn1_reduce},
    {"bn1 backward elemt", 0, op_bn1_bwd_elemt},
    {"conv1 backward dw db", F_CONV1, op_conv1_bwd},
    {"sgd (conv2, fc weights)", 0, op_sgd},
};
enum { NOPS = sizeof ops / sizeof ops[0] };

int main(int argc, char **argv)
{
    const int threads = argc > 1 ? atoi(argv[1]) : 1;
    const int n = argc > 2 ? atoi(argv[2]) : 32;
    const int rounds = argc > 3 ? atoi(argv[3]) : 30;
    if (threads < 1 || n < 1 || rounds < 1) {
        fprintf(stderr, "usage: bench_convnet_ops [THREADS [BATCH [ROUNDS]]]\n");
        return 2;
    }
    struct backend *be[2] = {backend_cpu_create_path(threads, 0, CPU_PATH_REFERENCE),
                             backend_cpu_create_path(threads, 0, CPU_PATH_FAST)};
    if (!be[0] || !be[1]) {
        fprintf(stderr, "bench_convnet_ops: cannot create the CPU backends\n");
        return 1;
    }
    struct net nets[2];
    net_init(&nets[0], be[0], n);
    net_init(&nets[1], be[1], n);
    double best[2][NOPS];
    for (int b = 0; b < 2; b++)
        for (int i = 0; i < NOPS; i++) {
            best[b][i] = 1e30;
            ops[i].run(&nets[b]); /* warm-up: plans, workspaces */
        }
    for (int r = 0; r < rounds; r++)
        for (int i = 0; i < NOPS; i++)
            for (int b = 0; b < 2; b++) {
                const int64_t t0 = clock_now_ns();
                ops[i].run(&nets[b]);
                const double us = 1e-3 * (double)(clock_now_ns() - t0);
                if (us < best[b][i])
                    best[b][i] = us;
            }
    printf("bench_convnet_ops: ConvNet step ops, batch %d, %d thread(s), best of %d rounds\n",
           n, threads, rounds);
    printf("  reference: %s\n  fast:      %s\n", backend_cpu_describe(be[0]),
           backend_cpu_describe(be[1]));
    printf("%-26s %12s %12s %10s %10s\n", "op", "ref_us", "fast_us", "ref_GF/s", "fast_GF/s");
    double tot[2] = {0, 0}, conv[2] = {0, 0};
    for (int i = 0; i < NOPS; i++) {
        printf("%-26s %12.1f %12.1f", ops[i].name, best[0][i], best[1][i]);
        if (ops[i].flops > 0)
            printf(" %10.1f %10.1f", ops[i].flops * n / best[0][i] / 1e3,
                   ops[i].flops * n / best[1][i] / 1e3);
        printf("\n");
        for (int b = 0; b < 2; b++) {
            tot[b] += best[b][i];
            if (strncmp(ops[i].name, "conv", 4) == 0)
                conv[b] += best[b][i];
        }
    }
    printf("%-26s %12.1f %12.1f\n", "all convolutions", conv[0], conv[1]);
    printf("%-26s %12.1f %12.1f\n", "everything else", tot[0] - conv[0], tot[1] - conv[1]);
    printf("%-26s %12.1f %12.1f  (%.0f / %.0f images/s for these ops alone)\n", "step", tot[0],
           tot[1], n / tot[0] * 1e6, n / tot[1] * 1e6);
    be[0]->destroy(be[0]);
    be[1]->destroy(be[1]);
    return 0;
}
