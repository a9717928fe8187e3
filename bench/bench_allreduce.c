/* bench_allreduce.c — ddpprof-bench-allreduce: the all-reduce of one comm transport alone
 * (no training around it), for scripts/bench-ddp to set beside PyTorch's.
 *
 *   ddpprof-bench-allreduce shm|gloo RANKS ITERS BYTES...
 *
 * Forks RANKS processes on this host that meet in a store (rank 0 hosts it on a free port)
 * and open the comm; for each size, 3 warm-up all-reduces of BYTES of fp32, then 5 rounds of
 * ITERS timed ones back to back (blocking: issue, wait), each round starting after a barrier.
 * Rank 0 prints one line per size, from the median round (a shared machine's noise hits some
 * rounds, not the figure) and the best one:
 *   allreduce <comm> ranks <n> bytes <B> mean_us <t> best_us <t> algbw_GBps <B/t>
 *   busbw_GBps <algbw*2(n-1)/n>
 * (busbw as nccl-tests and report/FORMULAS.md define it).  Prints figures, asserts nothing. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "comm/comm.h"
#include "comm/comm_gloo.h"
#include "comm/comm_shm.h"
#include "comm/store.h"
#include "common/clock.h"
#include "common/error.h"
#include "launch/launcher.h"

#define BENCH_TIMEOUT_MS 60000
#define BENCH_ROUNDS 5

static int bench_rank(const char *kind, int rank, int world, int port, int iters, int nsizes,
                      const long *sizes)
{
    struct store *s = store_create("127.0.0.1", port, rank == 0, rank, world, BENCH_TIMEOUT_MS);
    if (!s)
        return fprintf(stderr, "rank %d: %s\n", rank, error_get()), 1;
    struct comm *c = NULL;
    if (strcmp(kind, "gloo") == 0) {
        c = comm_gloo_create(s, "bench/", rank, world, "127.0.0.1", BENCH_TIMEOUT_MS);
    } else {
        char name[64];
        snprintf(name, sizeof name, "/ddpprof-bench-%d", port);
        /* the trainer's slot (device.c: 4 MiB), so chunking is the same as in training */
        c = comm_shm_create(rank, world, name, (size_t)4 << 20, BENCH_TIMEOUT_MS);
    }
    if (!c) {
        fprintf(stderr, "rank %d: %s\n", rank, error_get());
        store_abort(s);
        return 1;
    }
    int rc = 0;
    for (int i = 0; i < nsizes && rc == 0; i++) {
        size_t n = (size_t)sizes[i] / sizeof(float);
        float *buf = calloc(n ? n : 1, sizeof *buf);
        for (size_t k = 0; k < n; k++)
            buf[k] = (float)(k % 13) * 0.01f;
        for (int w = 0; w < 3 && rc == 0; w++)
            rc = comm_allreduce(c, buf, n, COMM_F32);
        double round_s[BENCH_ROUNDS];
        for (int k = 0; k < BENCH_ROUNDS && rc == 0; k++) {
            rc = c->barrier(c);
            double t0 = clock_now_s();
            for (int it = 0; it < iters && rc == 0; it++)
                rc = comm_allreduce(c, buf, n, COMM_F32);
            round_s[k] = (clock_now_s() - t0) / iters;
            for (int j = k; j > 0 && round_s[j] < round_s[j - 1]; j--) { /* sorted */
                double t = round_s[j];
                round_s[j] = round_s[j - 1];
                round_s[j - 1] = t;
            }
        }
        if (rc)
            fprintf(stderr, "rank %d: %s\n", rank, error_get());
        else if (rank == 0) {
            double dt = round_s[BENCH_ROUNDS / 2];
            double algbw = (double)n * sizeof(float) / dt / 1e9;
            printf("allreduce %s ranks %d bytes %zu mean_us %.1f best_us %.1f algbw_GBps %.4f "
                   "busbw_GBps %.4f\n",
                   c->name, world, n * sizeof(float), dt * 1e6, round_s[0] * 1e6, algbw,
                   algbw * 2.0 * (world - 1) / world);
            fflush(stdout);
        }
        free(buf);
    }
    c->destroy(c);
    store_destroy(s);
    return rc ? 1 : 0;
}

int main(int argc, char **argv)
{
    if (argc < 5 || (strcmp(argv[1], "shm") && strcmp(argv[1], "gloo"))) {
        fprintf(stderr, "usage: ddpprof-bench-allreduce shm|gloo RANKS ITERS BYTES...\n");
        return 2;
    }
    int world = atoi(argv[2]), iters = atoi(argv[3]), nsizes = argc - 4;
    long *sizes = calloc((size_t)nsizes, sizeof *sizes);
    for (int i = 0; i < nsizes; i++)
        sizes[i] = atol(argv[4 + i]);
    int port = launcher_free_port();
    if (world < 1 || world > 64 || iters < 1 || port < 0)
        return fprintf(stderr, "bad ranks %d or iterations %d (or no free port)\n", world, iters), 2;
    pid_t pids[64];
    fflush(NULL);
    for (int r = 0; r < world; r++)
        if ((pids[r] = fork()) == 0)
            _exit(bench_rank(argv[1], r, world, port, iters, nsizes, sizes));
    int bad = 0;
    for (int r = 0; r < world; r++) {
        int st;
        waitpid(pids[r], &st, 0);
        bad |= !WIFEXITED(st) || WEXITSTATUS(st) != 0;
    }
    free(sizes);
    return bad;
}
