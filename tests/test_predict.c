/* test_predict.c — the prediction engine (report/analysis/predict.h) on synthetic steps
 * whose answers are worked out by hand: one bucket and no overlap (the whole all-reduce
 * after backward), perfect overlap (the big bucket hidden under the first layer's
 * backward, only the last tiny one exposed), comm-bound (four buckets queued on the one comm stream), the ring's
 * cost at 4 ranks, its floor, the straggler term, the ring fit recovering the latency and
 * bandwidth a synthetic comm was made with, a ring that steps only at gradients (comm
 * threads sharing the ranks' cores), the bad configurations, and the 80 % interval: its
 * terms combined, and predict_one's comm term, skew at another world and from one rank. */
#include "common/error.h"
#include "report/analysis/predict.h"
#include "testutil.h"

#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#define MIB 1048576.0
/* 8 Gbit/s is 10^6 bytes per ms: the ring at 2 ranks moves bytes in bytes / 10^6 ms */
static const struct predict_comm link8 = {.latency_us = 0.0, .bandwidth_gbps = 8.0};

/* the sums below are of a few doubles: exact to ~1e-12 ms */
#define NEAR(a, b) (fabs((a) - (b)) < 1e-9)

static void test_one_bucket_no_overlap(void)
{
    struct predict_layer layers[1] = {{"fc", 2.0, 3.0}};
    struct predict_param params[1] = {{1000000, 0}};
    struct predict_model m = {.layers = layers, .nlayers = 1, .params = params, .nparams = 1,
                              .data_ms = 0.5, .forward_ms = 2.0, .backward_ms = 3.0,
                              .optimizer_ms = 0.25};
    struct predict_config c = {.world = 2, .bucket_cap_mb = 25, .comm = link8};
    struct predict_out o;
    CHECK(predict_replay(&m, &c, &o) == 0, "replay: %s", error_get());
    /* the one gradient is ready at backward's end: its 1 ms all-reduce is all exposed */
    CHECK(o.buckets == 1, "%d buckets", o.buckets);
    CHECK(NEAR(o.comm_ms, 1.0), "comm %.12f ms, want 1", o.comm_ms);
    CHECK(NEAR(o.exposed_comm_ms, 1.0), "exposed %.12f ms, want 1", o.exposed_comm_ms);
    CHECK(NEAR(o.overlap_pct, 0.0), "overlap %.6f %%, want 0", o.overlap_pct);
    CHECK(NEAR(o.compute_ms, 5.75), "compute %.12f ms", o.compute_ms);
    CHECK(NEAR(o.step_ms, 6.75), "step %.12f ms, want 6.75", o.step_ms);
    /* one rank: nothing to all-reduce */
    c.world = 1;
    CHECK(predict_replay(&m, &c, &o) == 0 && NEAR(o.step_ms, 5.75) && o.comm_ms == 0.0,
          "world 1: step %.6f comm %.6f", o.step_ms, o.comm_ms);
}

/* Two layers, forward 2 ms, backward 10 ms (5 each): conv's 4 bytes, fc's 1 MiB; fc's
 * backward runs first (2-7 ms), conv's last (7-12 ms). */
static struct predict_layer overlap_layers[2] = {{"conv", 1.0, 5.0}, {"fc", 1.0, 5.0}};
static struct predict_param overlap_params[2] = {{4, 0}, {(size_t)MIB, 1}};

static struct predict_model overlap_model(void)
{
    return (struct predict_model){.layers = overlap_layers, .nlayers = 2,
                                  .params = overlap_params, .nparams = 2, .forward_ms = 2.0,
                                  .backward_ms = 10.0};
}

static void test_perfect_overlap(void)
{
    /* layer 1 (backward's first) holds 1 MiB: bucket 0 closes at PyTorch's 1 MiB first cap
     * and is all-reduced (1.048576 ms) during layer 0's 5 ms backward; layer 0's 4 bytes
     * are bucket 1, exposed for 2 * 1/2 * 4 / 10^6 ms */
    struct predict_param params[2] = {overlap_params[0], overlap_params[1]};
    struct predict_model m = overlap_model();
    m.params = params; /* changed below */
    struct predict_config c = {.world = 2, .bucket_cap_mb = 25, .comm = link8};
    struct predict_out o;
    CHECK(predict_replay(&m, &c, &o) == 0, "replay: %s", error_get());
    CHECK(o.buckets == 2, "%d buckets, want 2", o.buckets);
    CHECK(NEAR(o.exposed_comm_ms, 4e-6), "exposed %.12f ms, want 4e-6", o.exposed_comm_ms);
    CHECK(NEAR(o.comm_ms, 1.048576 + 4e-6), "comm %.12f ms", o.comm_ms);
    CHECK(NEAR(o.step_ms, 12.0 + 4e-6), "step %.12f ms", o.step_ms);
    /* layer 1 with 1000 bytes instead: 1004 bytes fit the first bucket, one bucket ready at
     * backward's end, all of its 1004e-6 ms exposed */
    params[1].bytes = 1000;
    CHECK(predict_replay(&m, &c, &o) == 0 && o.buckets == 1, "1004 bytes: %d buckets",
          o.buckets);
    CHECK(NEAR(o.exposed_comm_ms, 1004e-6), "one bucket: exposed %.12f", o.exposed_comm_ms);
}

static void test_comm_bound(void)
{
    /* four layers of 1 ms backward and 1 MiB each, cap 1 MB: four buckets of 1.048576 ms
     * queued on the one comm stream, ready at 1, 2, 3, 4 ms into backward: they end at
     * 2.048576, 3.097152, 4.145728, 5.194304 -- 1.194304 ms after backward */
    struct predict_layer layers[4] = {{"a", 0, 1}, {"b", 0, 1}, {"c", 0, 1}, {"d", 0, 1}};
    struct predict_param params[4] = {{(size_t)MIB, 0}, {(size_t)MIB, 1}, {(size_t)MIB, 2},
                                      {(size_t)MIB, 3}};
    struct predict_model m = {.layers = layers, .nlayers = 4, .params = params, .nparams = 4,
                              .backward_ms = 4.0};
    struct predict_config c = {.world = 2, .bucket_cap_mb = 1, .comm = link8};
    struct predict_out o;
    CHECK(predict_replay(&m, &c, &o) == 0, "replay: %s", error_get());
    CHECK(o.buckets == 4, "%d buckets, want 4", o.buckets);
    CHECK(NEAR(o.comm_ms, 4 * 1.048576), "comm %.12f ms", o.comm_ms);
    CHECK(NEAR(o.exposed_comm_ms, 1.194304), "exposed %.12f ms, want 1.194304",
          o.exposed_comm_ms);
    CHECK(NEAR(o.overlap_pct, 100.0 * 3.0 / 4.194304), "overlap %.9f %%", o.overlap_pct);
    CHECK(NEAR(o.step_ms, 5.194304), "step %.12f ms", o.step_ms);
    /* one big bucket instead (cap 25 MB, first cap 1 MiB: bucket 0 is layer d's 1 MiB,
     * bucket 1 the other three): 1.048576 from 1 to 2.048576, then 3.145728 from 4 */
    c.bucket_cap_mb = 25;
    CHECK(predict_replay(&m, &c, &o) == 0 && o.buckets == 2, "cap 25: %d buckets", o.buckets);
    CHECK(NEAR(o.exposed_comm_ms, 3.145728), "cap 25: exposed %.12f", o.exposed_comm_ms);
    /* no per-layer rows: gradients spread over backward by bytes, the same here */
    m.nlayers = 0;
    c.bucket_cap_mb = 1;
    CHECK(predict_replay(&m, &c, &o) == 0 && NEAR(o.exposed_comm_ms, 1.194304),
          "no layers: exposed %.12f", o.exposed_comm_ms);
}

static void test_ring_and_fit(void)
{
    /* 4 ranks, 10 µs, 8 Gbit/s: 2*3/4 * 10^6 / 10^6 + 6 * 0.01 = 1.56 ms */
    struct predict_comm c = {.latency_us = 10.0, .bandwidth_gbps = 8.0};
    CHECK(NEAR(predict_ring_ms(&c, 4, 1e6), 1.56), "ring %.12f", predict_ring_ms(&c, 4, 1e6));
    CHECK(predict_ring_ms(&c, 1, 1e6) == 0.0, "one rank: no all-reduce");
    /* a comm made of the ring at 2 ranks, 25 µs, 3 Gbit/s, is found again */
    struct predict_comm made = {.latency_us = 25.0, .bandwidth_gbps = 3.0}, got = {0};
    double bytes[5] = {4096, 65536, 262144, 1048576, 4194304}, ms[5];
    for (int i = 0; i < 5; i++)
        ms[i] = predict_ring_ms(&made, 2, bytes[i]);
    CHECK(predict_fit_ring(bytes, ms, 5, 2, &got) == 0, "fit failed");
    CHECK(fabs(got.latency_us - 25.0) < 1e-6 && fabs(got.bandwidth_gbps - 3.0) < 1e-9,
          "fit: %.9f µs, %.12f Gbit/s; want 25, 3", got.latency_us, got.bandwidth_gbps);
    /* one size: through the origin, latency 0 */
    CHECK(predict_fit_ring(bytes + 3, ms + 3, 1, 2, &got) == 0 && got.latency_us == 0.0 &&
              NEAR(predict_ring_ms(&got, 2, bytes[3]), ms[3]),
          "one size: %.6f µs %.6f Gbit/s", got.latency_us, got.bandwidth_gbps);
    CHECK(predict_fit_ring(bytes, ms, 0, 2, &got) == -1, "no samples: no fit");
    CHECK(predict_fit_ring(bytes, ms, 5, 1, &got) == -1, "one rank: no fit");
}

static void test_floor(void)
{
    /* the floor is the least an all-reduce of 2+ ranks takes: 4 bytes at 8 Gbit/s would
     * take 4e-6 ms, 2 ms with a 2 ms floor; 10^6 bytes (1 ms on the line) stay 1 ms under a
     * 0.5 ms floor; one rank still takes nothing */
    struct predict_comm f = link8;
    f.floor_ms = 2.0;
    CHECK(NEAR(predict_ring_ms(&f, 2, 4), 2.0), "floor: %.12f", predict_ring_ms(&f, 2, 4));
    CHECK(predict_ring_ms(&f, 1, 4) == 0.0, "floor, one rank: %.12f", predict_ring_ms(&f, 1, 4));
    f.floor_ms = 0.5;
    CHECK(NEAR(predict_ring_ms(&f, 2, 1e6), 1.0), "above the floor: %.12f",
          predict_ring_ms(&f, 2, 1e6));
    /* the perfect-overlap step of test_perfect_overlap with a 3 ms floor: bucket 0 (1 MiB)
     * ready at 2 + 5 = 7 ms runs 7-10 ms (3 ms, not 1.048576), inside backward (2-12 ms);
     * bucket 1 (4 bytes) ready at 12 runs 12-15: 3 ms exposed, 6 ms of all-reduce */
    struct predict_model m = overlap_model();
    struct predict_config c = {.world = 2, .bucket_cap_mb = 25, .comm = link8};
    c.comm.floor_ms = 3.0;
    struct predict_out o;
    CHECK(predict_replay(&m, &c, &o) == 0, "replay: %s", error_get());
    CHECK(NEAR(o.exposed_comm_ms, 3.0) && NEAR(o.comm_ms, 6.0) && NEAR(o.step_ms, 15.0),
          "floor 3 ms: exposed %.12f comm %.12f step %.12f, want 3, 6, 15", o.exposed_comm_ms,
          o.comm_ms, o.step_ms);
}

static void test_busy(void)
{
    /* the busy term: an all-reduce that starts before backward ends takes busy_ms more.  The
     * model of test_floor: bucket 0 (1 MiB) ready at 7 ms, backward 2-12 ms; bucket 1 (4
     * bytes) ready at 12, when backward ends: never busy.  busy 2: bucket 0 runs 7-10.048576
     * (3.048576), bucket 1 12-12.000004: exposed 4e-6.  busy 6: bucket 0 runs 7-14.048576,
     * bucket 1 starts after it, past backward's end, unslowed: exposed 2.04858 */
    struct predict_model m = overlap_model();
    struct predict_config c = {.world = 2, .bucket_cap_mb = 0.5, .comm = link8};
    struct predict_out o;
    c.comm.busy_ms = 2.0;
    CHECK(predict_replay(&m, &c, &o) == 0 && o.buckets == 2, "replay: %s, %d buckets",
          error_get(), o.buckets);
    CHECK(NEAR(o.comm_ms, 3.048576 + 4e-6) && NEAR(o.exposed_comm_ms, 4e-6),
          "busy 2: comm %.12f exposed %.12f, want 3.04858, 4e-6", o.comm_ms, o.exposed_comm_ms);
    c.comm.busy_ms = 6.0;
    CHECK(predict_replay(&m, &c, &o) == 0, "replay: %s", error_get());
    CHECK(NEAR(o.comm_ms, 7.048576 + 4e-6) && NEAR(o.exposed_comm_ms, 2.048576 + 4e-6) &&
              NEAR(o.step_ms, 14.048576 + 4e-6),
          "busy 6: comm %.12f exposed %.12f step %.12f, want 7.04858, 2.04858, 14.0486",
          o.comm_ms, o.exposed_comm_ms, o.step_ms);
    /* one rank: no collective, nothing busy */
    c.world = 1;
    CHECK(predict_replay(&m, &c, &o) == 0 && o.comm_ms == 0.0 && o.exposed_comm_ms == 0.0,
          "busy, one rank: comm %.12f exposed %.12f", o.comm_ms, o.exposed_comm_ms);
}

static void test_straggler(void)
{
    /* two ranks drawing from {1, 2}: E[max] = 1/4 * 1 + 3/4 * 2 = 1.75, mean 1.5 */
    const double s[2] = {1.0, 2.0};
    CHECK(NEAR(predict_straggler_ms(s, 2, 2), 0.25), "%.12f", predict_straggler_ms(s, 2, 2));
    /* four ranks: E[max] = 1/16 + 2 * 15/16 = 1.9375 */
    CHECK(NEAR(predict_straggler_ms(s, 2, 4), 0.4375), "%.12f", predict_straggler_ms(s, 2, 4));
    CHECK(predict_straggler_ms(s, 2, 1) == 0.0, "one rank waits for no one");
    const double same[3] = {3.0, 3.0, 3.0};
    CHECK(NEAR(predict_straggler_ms(same, 3, 8), 0.0), "equal ranks: no wait");
}

static void test_bad_config(void)
{
    struct predict_param params[1] = {{100, -1}};
    struct predict_model m = {.params = params, .nparams = 1, .backward_ms = 1.0};
    struct predict_out o;
    struct predict_config c = {.world = 0, .bucket_cap_mb = 25, .comm = link8};
    CHECK(predict_replay(&m, &c, &o) == -1 && strstr(error_get(), "world size 0"),
          "world 0: %s", error_get());
    c.world = 2;
    c.bucket_cap_mb = 0;
    CHECK(predict_replay(&m, &c, &o) == -1 && strstr(error_get(), "bucket cap"),
          "cap 0: %s", error_get());
    c.bucket_cap_mb = 25;
    c.comm.bandwidth_gbps = 0;
    CHECK(predict_replay(&m, &c, &o) == -1 && strstr(error_get(), "bandwidth"),
          "bandwidth 0: %s", error_get());
}

/* The comm's threads run only at a gradient (grad_progress): layers a, b, c (forward
 * order), backward c 1 ms (1 MiB), b 6 ms (4 bytes), a 0.2 ms (4 bytes): gradients ready at
 * 1, 7 and 7.2 = backward's end.  Bucket 0 (c's 1 MiB, the first cap) starts at 1; its ring
 * at 2 ranks is 2 steps of 0.524288 ms: the first 1 -> 1.524288, the second at the next
 * gradient, 7 -> 7.524288, after backward's end, so it completes then (6.524288 ms, not
 * 1.048576); bucket 1 (8 bytes, ready 7.2) follows: 8e-6 ms, ending 0.324296 after
 * backward. */
static void test_grad_progress(void)
{
    struct predict_layer layers[3] = {{"a", 0, 0.2}, {"b", 0, 6.0}, {"c", 0, 1.0}};
    struct predict_param params[3] = {{4, 0}, {4, 1}, {(size_t)MIB, 2}};
    struct predict_model m = {.layers = layers, .nlayers = 3, .params = params, .nparams = 3,
                              .backward_ms = 7.2};
    struct predict_config c = {.world = 2, .bucket_cap_mb = 25, .comm = link8};
    struct predict_out o;
    /* without: bucket 0 from 1 to 2.048576, hidden; bucket 1's 8e-6 exposed */
    CHECK(predict_replay(&m, &c, &o) == 0 && o.buckets == 2, "replay: %d buckets",
          o.buckets);
    CHECK(NEAR(o.exposed_comm_ms, 8e-6), "no progress: exposed %.12f, want 8e-6",
          o.exposed_comm_ms);
    c.comm.grad_progress = 1;
    CHECK(predict_replay(&m, &c, &o) == 0, "replay: %s", error_get());
    CHECK(NEAR(o.comm_ms, 6.524296), "progress: comm %.12f ms, want 6.524296", o.comm_ms);
    CHECK(NEAR(o.exposed_comm_ms, 0.324296), "progress: exposed %.12f, want 0.324296",
          o.exposed_comm_ms);
    CHECK(NEAR(o.step_ms, 7.524296), "progress: step %.12f, want 7.524296", o.step_ms);
    /* busy 0.5 on top (the comm's own cost beside backward): bucket 0 ends 8.024288 */
    c.comm.busy_ms = 0.5;
    CHECK(predict_replay(&m, &c, &o) == 0 && NEAR(o.exposed_comm_ms, 0.824296),
          "progress + busy: exposed %.12f, want 0.824296", o.exposed_comm_ms);
    /* 4 ranks: 6 steps of 1.572864 / 6 = 0.262144: 1 -> 1.262144, then 7 -> 7.262144, past
     * backward's end the other 4 back to back: 8.310720; bucket 1 1.2e-5 more */
    c.comm.busy_ms = 0.0;
    c.world = 4;
    CHECK(predict_replay(&m, &c, &o) == 0 && NEAR(o.exposed_comm_ms, 1.110732),
          "4 ranks: exposed %.12f, want 1.110732", o.exposed_comm_ms);
    /* a bucket that starts at backward's end is the plain ring: one bucket of 1 MiB + 8 */
    c.world = 2;
    params[2].bytes = 1000;
    CHECK(predict_replay(&m, &c, &o) == 0 && o.buckets == 1 && NEAR(o.exposed_comm_ms, 1008e-6),
          "one bucket: %d, exposed %.12f, want 1008e-6", o.buckets, o.exposed_comm_ms);
}

/* The busy term is what the replay does not explain already (predict_fit_busy): in
 * test_grad_progress's model, bucket 0 (1 MiB, beside backward) takes 6.524288 ms in the
 * replay without busy (its ring's second step waits for the gradient at 7 ms).  Measured
 * durations of 7.024288 and 7.124288 ms (and 6.924288, the lower middle of three) hold a
 * busy of 0.4-0.6: the fit finds 0.5 of it, and the replay with it gives the measured
 * median back.  Counted against the line (1.048576 ms, the rule before), the same
 * measurements gave busy 5.975712, which the replay added to the 6.524288 it already
 * takes -- the wait for the gradient twice (shaped grid 2026-12-07: busy 2.044 ms, and
 * from the 1-rank run +7 to +10 % at 3 and 7 buckets).  Without grad_progress the replay's
 * time is the line's, and busy is the excess over it, as before. */
static void test_fit_busy(void)
{
    struct predict_layer layers[3] = {{"a", 0, 0.2}, {"b", 0, 6.0}, {"c", 0, 1.0}};
    struct predict_param params[3] = {{4, 0}, {4, 1}, {(size_t)MIB, 2}};
    struct predict_model m = {.layers = layers, .nlayers = 3, .params = params, .nparams = 3,
                              .backward_ms = 7.2};
    struct predict_config c = {.world = 2, .bucket_cap_mb = 25, .comm = link8};
    c.comm.grad_progress = 1;
    c.comm.busy_ms = 9.0; /* ignored: the fit replays without busy */
    double bytes[3] = {(double)MIB, (double)MIB, (double)MIB};
    double ms[3] = {7.024288, 7.124288, 6.924288}, busy = -1;
    CHECK(predict_fit_busy(&m, &c, bytes, ms, 3, &busy) == 0, "fit: %s", error_get());
    CHECK(NEAR(busy, 0.5), "busy %.12f, want 0.5 (the excess over 6.524288)", busy);
    CHECK(NEAR(ms[0], 0.5) && NEAR(ms[1], 0.6) && NEAR(ms[2], 0.4),
          "excesses %.9f %.9f %.9f, want 0.5 0.6 0.4", ms[0], ms[1], ms[2]);
    struct predict_out o;
    struct predict_bucket_log log;
    c.comm.busy_ms = busy;
    CHECK(predict_replay_log(&m, &c, &o, &log) == 0 && log.n == 2 && log.b[0].beside &&
              log.b[0].bytes == (size_t)MIB && NEAR(log.b[0].ms, 7.024288) && !log.b[1].beside,
          "replay with it: %d buckets, bucket 0 %.9f ms beside %d, want 7.024288",
          log.n, log.n ? log.b[0].ms : 0.0, log.n ? log.b[0].beside : -1);
    free(log.b);
    /* the comm beside compute: the line's 1.048576 is what busy is measured against */
    c.comm.grad_progress = 0;
    double ms2[3] = {1.548576, 1.648576, 1.448576};
    CHECK(predict_fit_busy(&m, &c, bytes, ms2, 3, &busy) == 0 && NEAR(busy, 0.5),
          "no progress: busy %.12f, want 0.5", busy);
    /* a measurement of a size the replay does not form: against the line too, and an
     * excess below 0 is no busy */
    c.comm.grad_progress = 1;
    double odd[1] = {12345}, ms3[1] = {0.001};
    CHECK(predict_fit_busy(&m, &c, odd, ms3, 1, &busy) == 0 && busy == 0.0,
          "odd size: busy %.12f, want 0", busy);
}

/* The comm's CPU beside backward (report/FORMULAS.md): test_grad_progress's model, 1e-6
 * ms of CPU per byte moved.  Bucket 0 (1 MiB) starts before backward ends: at 2 ranks the
 * ring moves 2(N-1)/N = 1 of its bytes, 1.048576 ms, added to compute and the step; bucket
 * 1 (8 bytes, at backward's end) is not beside it.  4 ranks: 1.5 of the bytes; 1 rank: no
 * all-reduce, nothing; one bucket ready at backward's end: nothing either. */
static void test_comm_cpu(void)
{
    struct predict_layer layers[3] = {{"a", 0, 0.2}, {"b", 0, 6.0}, {"c", 0, 1.0}};
    struct predict_param params[3] = {{4, 0}, {4, 1}, {(size_t)MIB, 2}};
    struct predict_model m = {.layers = layers, .nlayers = 3, .params = params, .nparams = 3,
                              .backward_ms = 7.2};
    struct predict_config c = {.world = 2, .bucket_cap_mb = 25, .comm = link8};
    struct predict_out o, without;
    CHECK(predict_replay(&m, &c, &without) == 0, "replay: %s", error_get());
    c.comm.cpu_ms_per_byte = 1e-6;
    CHECK(predict_replay(&m, &c, &o) == 0 && NEAR(o.cpu_bwd_ms, 1.048576) &&
              NEAR(o.compute_ms - without.compute_ms, 1.048576) &&
              NEAR(o.step_ms - without.step_ms, 1.048576),
          "2 ranks: cpu_bwd %.9f, compute +%.9f, step +%.9f; want 1.048576", o.cpu_bwd_ms,
          o.compute_ms - without.compute_ms, o.step_ms - without.step_ms);
    c.world = 4;
    CHECK(predict_replay(&m, &c, &o) == 0 && NEAR(o.cpu_bwd_ms, 1.572864),
          "4 ranks: cpu_bwd %.9f, want 1.572864", o.cpu_bwd_ms);
    c.world = 1;
    CHECK(predict_replay(&m, &c, &o) == 0 && o.cpu_bwd_ms == 0.0 &&
              NEAR(o.compute_ms, without.compute_ms),
          "1 rank: cpu_bwd %.9f, want 0", o.cpu_bwd_ms);
    c.world = 2;
    params[2].bytes = 1000;
    CHECK(predict_replay(&m, &c, &o) == 0 && o.buckets == 1 && o.cpu_bwd_ms == 0.0,
          "one bucket at backward's end: %d buckets, cpu_bwd %.9f, want 0", o.buckets,
          o.cpu_bwd_ms);
}

/* The 80 % interval (report/FORMULAS.md "The 80 % interval"): each side's terms in
 * quadrature, worked by hand with Pythagorean triples.  Step 20 ms: low side 0.15 * 20 = 3,
 * comm 4, skew 12: sqrt(9 + 16 + 144) = 13, from 7; high side 0.3 * 20 = 6, comm 4, skew 12:
 * sqrt(36 + 16 + 144) = 14, to 34.  A low end below 0 is 0. */
static void test_interval_combine(void)
{
    double lo, hi;
    predict_interval_combine(20.0, 0.15, 0.3, 4.0, 4.0, 12.0, &lo, &hi);
    CHECK(NEAR(lo, 7.0) && NEAR(hi, 34.0), "combine: %.12f-%.12f, want 7-34", lo, hi);
    predict_interval_combine(1.0, 0.5, 0.0, 0.0, 0.0, 3.0, &lo, &hi);
    CHECK(lo == 0.0 && NEAR(hi, 4.0), "combine, low end below 0: %.12f-%.12f, want 0-4", lo, hi);
    /* the comm term's offset: every all-reduce of 2 ranks or more takes offset_ms more, at
     * least 0; one rank still takes nothing */
    struct predict_comm c = link8;
    c.offset_ms = 0.25;
    CHECK(NEAR(predict_ring_ms(&c, 2, 1e6), 1.25), "offset +0.25: %.12f",
          predict_ring_ms(&c, 2, 1e6));
    c.offset_ms = -2.0;
    CHECK(predict_ring_ms(&c, 2, 1e6) == 0.0, "offset -2: %.12f", predict_ring_ms(&c, 2, 1e6));
    c.offset_ms = 0.25;
    CHECK(predict_ring_ms(&c, 1, 1e6) == 0.0, "offset, one rank: %.12f",
          predict_ring_ms(&c, 1, 1e6));
}

/* predict_one's interval on sources built by hand (no run behind them: predict_one reads
 * the model, the measured step, the world and the spread) */
static void test_interval_one(void)
{
    /* the comm term: the model of test_comm_bound (four layers of 1 ms backward, 1 MiB
     * each) measured at 10 ms with cap 25 (2 buckets: 1 MiB from 1 ms, 3 MiB from 4 ms,
     * exposed 3.145728) predicted at cap 1 (4 buckets, exposed 1.194304): 10 - 1.951424 =
     * 8.048576.  The fit's residuals -0.2 and +0.3 ms an all-reduce: with 0.3 more each, 4
     * buckets of 1.348576 end 6.394304 (exposed 2.394304), the 2 of the run's cap 7.445728
     * (3.445728): the step moves by +0.9; with 0.2 less, 0.848576 each end 4.848576
     * (0.848576) and 6.945728 (2.945728): by -0.145728.  No spread, no skew: the interval
     * is those */
    struct predict_layer layers[4] = {{"a", 0, 1}, {"b", 0, 1}, {"c", 0, 1}, {"d", 0, 1}};
    struct predict_param params[4] = {{(size_t)MIB, 0}, {(size_t)MIB, 1}, {(size_t)MIB, 2},
                                      {(size_t)MIB, 3}};
    struct predict_source s = {.world = 2, .step_ms = 10.0};
    s.m = (struct predict_model){.layers = layers, .nlayers = 4, .params = params, .nparams = 4,
                                 .backward_ms = 4.0};
    struct predict_config own = {.world = 2, .bucket_cap_mb = 25, .comm = link8};
    own.comm.resid_sizes = 4;
    own.comm.resid_lo_ms = -0.2;
    own.comm.resid_hi_ms = 0.3;
    struct predict_config c = own;
    c.bucket_cap_mb = 1;
    struct predict_out own_out, o;
    CHECK(predict_replay(&s.m, &own, &own_out) == 0, "replay: %s", error_get());
    CHECK(predict_one(&s, &s.m, &own, &own_out, &c, &o) == 0, "predict_one: %s", error_get());
    CHECK(NEAR(o.step_ms, 8.048576) && NEAR(o.step_lo_ms, 8.048576 - 0.145728) &&
              NEAR(o.step_hi_ms, 8.048576 + 0.9),
          "comm term: step %.12f in %.12f-%.12f, want 8.048576 in 7.902848-8.948576", o.step_ms,
          o.step_lo_ms, o.step_hi_ms);
    /* at the run's own configuration the offsets cancel: the interval is the spread's, here
     * the step p10 -10 %, p90 +20 % of 10 ms and a skew of 1 ms: 10 -/+ sqrt(1 + 1),
     * sqrt(4 + 1), as the measured row's */
    s.spread = (struct predict_spread){.steps = 10, .step_lo_rel = 0.1, .step_hi_rel = 0.2,
                                       .skew_steps = 10, .skew_ms = 1.0};
    CHECK(predict_one(&s, &s.m, &own, &own_out, &own, &o) == 0, "own: %s", error_get());
    double lo, hi;
    predict_measured_interval(&s, &lo, &hi);
    CHECK(NEAR(o.step_lo_ms, 10.0 - sqrt(2.0)) && NEAR(o.step_hi_ms, 10.0 + sqrt(5.0)) &&
              NEAR(lo, o.step_lo_ms) && NEAR(hi, o.step_hi_ms),
          "own configuration: %.12f-%.12f, measured row %.12f-%.12f, want 8.585786-12.236068",
          o.step_lo_ms, o.step_hi_ms, lo, hi);

    /* the skew at another world: scaled by the straggler term's ratio.  Per-rank compute
     * samples -0.5 and +0.5: straggler(2) = 0.25, straggler(4) = 0.4375 (test_straggler's
     * {1, 2} less their mean), ratio 1.75; a skew of 2 ms at 2 ranks is 3.5 ms at 4.  One
     * bucket of 10^6 bytes after backward (test_one_bucket_no_overlap's model): 1 ms at 2
     * ranks, 1.5 at 4, so the step is 10 + 0.5 + 0.1875; no spread, no residuals */
    struct predict_layer fc[1] = {{"fc", 2.0, 3.0}};
    struct predict_param p1[1] = {{1000000, 0}};
    double samples[2] = {-0.5, 0.5};
    struct predict_source s2 = {.world = 2, .step_ms = 10.0,
                                .spread = {.skew_steps = 5, .skew_ms = 2.0}};
    s2.m = (struct predict_model){.layers = fc, .nlayers = 1, .params = p1, .nparams = 1,
                                  .data_ms = 0.5, .forward_ms = 2.0, .backward_ms = 3.0,
                                  .compute_ms = samples, .ncompute = 2};
    struct predict_config own2 = {.world = 2, .bucket_cap_mb = 25, .comm = link8}, c4 = own2;
    c4.world = 4;
    CHECK(predict_replay(&s2.m, &own2, &own_out) == 0 &&
              predict_one(&s2, &s2.m, &own2, &own_out, &c4, &o) == 0,
          "world 4: %s", error_get());
    CHECK(NEAR(o.step_ms, 10.6875) && NEAR(o.step_lo_ms, 10.6875 - 3.5) &&
              NEAR(o.step_hi_ms, 10.6875 + 3.5),
          "skew at 4 ranks: step %.12f in %.12f-%.12f, want 10.6875 -/+ 3.5", o.step_ms,
          o.step_lo_ms, o.step_hi_ms);
    /* from a 1-rank run (no waits measured): the straggler term itself, 0.25 at 2 ranks;
     * predicted at 1 rank, no skew at all */
    s2.world = 1;
    s2.spread.skew_ms = 0;
    struct predict_config own1 = own2, c2 = own2;
    own1.world = 1;
    CHECK(predict_replay(&s2.m, &own1, &own_out) == 0 &&
              predict_one(&s2, &s2.m, &own1, &own_out, &c2, &o) == 0,
          "from 1 rank: %s", error_get());
    CHECK(NEAR(o.step_hi_ms - o.step_ms, 0.25) && NEAR(o.step_ms - o.step_lo_ms, 0.25),
          "from 1 rank at 2: %.12f in %.12f-%.12f, want -/+ 0.25", o.step_ms, o.step_lo_ms,
          o.step_hi_ms);
    CHECK(predict_one(&s2, &s2.m, &own1, &own_out, &own1, &o) == 0 &&
              o.step_lo_ms == o.step_ms && o.step_hi_ms == o.step_ms,
          "1 rank at 1: %.12f-%.12f around %.12f, want none", o.step_lo_ms, o.step_hi_ms,
          o.step_ms);
}

/* The rank-arrival wait the calibration run measured (stragglers.csv: the slowest rank's
 * gradients ready 2 ms after the mean rank's, the median step) is a term of the step:
 * test_one_bucket_no_overlap's model (compute 5.75 ms, one 1 ms all-reduce at 2 ranks after
 * backward) replays to 5.75 + 1 + 2 = 8.75 ms.  Measured at 10 ms (the wait inside), the
 * run's own configuration predicts 10 (the wait once, not 12); at 1 rank no all-reduce and
 * no wait: 10 + 5.75 - 8.75 = 7 (the straggler term of compute samples alone, none here,
 * would give 9); at 4 ranks, per-rank compute samples -0.5 and +0.5 (E[max] - mean 0.25 at
 * 2, 0.4375 at 4: ratio 1.75) make the wait 3.5 and the ring 1.5 ms: 10 + 10.75 - 8.75 =
 * 12. */
static void test_measured_wait(void)
{
    struct predict_layer layers[1] = {{"fc", 2.0, 3.0}};
    struct predict_param params[1] = {{1000000, 0}};
    double samples[2] = {-0.5, 0.5};
    struct predict_source s = {.world = 2, .step_ms = 10.0};
    s.m = (struct predict_model){.layers = layers, .nlayers = 1, .params = params, .nparams = 1,
                                 .data_ms = 0.5, .forward_ms = 2.0, .backward_ms = 3.0,
                                 .optimizer_ms = 0.25, .wait_ms = 2.0, .wait_world = 2};
    struct predict_config own = {.world = 2, .bucket_cap_mb = 25, .comm = link8}, c = own;
    struct predict_out own_out, o;
    CHECK(predict_replay(&s.m, &own, &own_out) == 0, "replay: %s", error_get());
    CHECK(NEAR(own_out.step_ms, 8.75) && NEAR(own_out.straggler_ms, 2.0),
          "replay at 2 ranks: step %.12f, wait %.12f, want 8.75 and 2", own_out.step_ms,
          own_out.straggler_ms);
    CHECK(predict_one(&s, &s.m, &own, &own_out, &c, &o) == 0 && NEAR(o.step_ms, 10.0),
          "own configuration: %.12f, want the measured 10 (the wait once)", o.step_ms);
    c.world = 1;
    CHECK(predict_one(&s, &s.m, &own, &own_out, &c, &o) == 0 && NEAR(o.step_ms, 7.0) &&
              o.straggler_ms == 0.0,
          "1 rank: step %.12f wait %.12f, want 7 and 0", o.step_ms, o.straggler_ms);
    s.m.compute_ms = samples;
    s.m.ncompute = 2;
    CHECK(predict_replay(&s.m, &own, &own_out) == 0 && NEAR(own_out.step_ms, 8.75),
          "replay with samples: %.12f, want 8.75 (the measured wait at its world)",
          own_out.step_ms);
    c.world = 4;
    CHECK(predict_one(&s, &s.m, &own, &own_out, &c, &o) == 0 && NEAR(o.straggler_ms, 3.5) &&
              NEAR(o.step_ms, 12.0),
          "4 ranks: wait %.12f step %.12f, want 3.5 and 12", o.straggler_ms, o.step_ms);
    /* no wait measured (a 1-rank run): the model's own E[max] - mean, 0.25 at 2 ranks */
    s.m.wait_world = 0;
    double w;
    CHECK(predict_straggler_of(&s.m, 2, &w) == 0 && NEAR(w, 0.25), "unmeasured: %.12f", w);
}

/* SyncBatchNorm off.  2 ranks; SyncBatchNorm's all-reduce in backward moves its data in
 * 1 ms (the least time of the two ranks) and one rank waits 5 ms in it for the other, a
 * step: the mean rank's wait 2.5 ms.  The model's backward, 6.5 ms, holds both (the fc
 * layer's own 3 ms, the rest 3.5 first); the wait at the end of backward is 0.2 ms.  Run's
 * own: 0.5 + 2 + 6.5 + 0.25 compute, 1 ms all-reduce after backward, 0.2 wait = 10.45,
 * measured 20.  Off: backward 3, the 2.5 ms lateness now reaches the gradient all-reduce
 * (wait 2.7): 5.75 + 1 + 2.7 = 9.45, so 19: the saving is the 1 ms transfer, not the 5 ms
 * (or 2.5) of waiting. */
static void test_sync_bn_off(void)
{
    struct predict_layer layers[1] = {{"fc", 2.0, 3.0}};
    struct predict_param params[1] = {{1000000, 0}};
    size_t held[2] = {4, 4096}; /* the loss's, then SyncBatchNorm's */
    struct predict_source s = {.world = 2, .step_ms = 20.0, .sync_bn = 1};
    s.m = (struct predict_model){.layers = layers, .nlayers = 1, .params = params, .nparams = 1,
                                 .data_ms = 0.5, .forward_ms = 2.0, .backward_ms = 6.5,
                                 .optimizer_ms = 0.25, .held_bytes = held, .nheld = 2,
                                 .held_world = 2, .nheld_sync_bn = 1, .wait_ms = 0.2,
                                 .wait_world = 2};
    s.sbn = (struct predict_sync_bn){.steps = 10, .calls = 1, .bwd_xfer_ms = 1.0,
                                     .bwd_wait_ms = 2.5};
    struct predict_model off;
    predict_model_sync_bn_off(&s.m, &s.sbn, &off);
    CHECK(NEAR(off.backward_ms, 3.0) && NEAR(off.forward_ms, 2.0) && off.nheld == 1 &&
              off.held_bytes[0] == 4 && NEAR(off.wait_ms, 2.7),
          "off model: backward %.12f forward %.12f held %d wait %.12f", off.backward_ms,
          off.forward_ms, off.nheld, off.wait_ms);
    struct predict_config own = {.world = 2, .bucket_cap_mb = 25, .comm = link8}, c = own;
    struct predict_out own_out, o;
    CHECK(predict_replay(&s.m, &own, &own_out) == 0 && NEAR(own_out.step_ms, 10.45),
          "own replay %.12f, want 10.45", own_out.step_ms);
    CHECK(predict_one(&s, &off, &own, &own_out, &c, &o) == 0 && NEAR(o.step_ms, 19.0),
          "SyncBatchNorm off: %.12f, want 19 (the transfer's 1 ms saved, not the wait)",
          o.step_ms);
    /* at 1 rank there is neither, nor the loss's all-reduce (4 bytes: 4e-6 ms at 2 ranks):
     * 20 + 5.75 - 10.45 - 0.000004 */
    c.world = 1;
    CHECK(predict_one(&s, &off, &own, &own_out, &c, &o) == 0 && NEAR(o.step_ms, 15.299996),
          "off at 1 rank: %.12f, want 15.299996", o.step_ms);
    /* nothing measured: the model unchanged */
    struct predict_sync_bn none = {0};
    predict_model_sync_bn_off(&s.m, &none, &off);
    CHECK(off.backward_ms == s.m.backward_ms && off.nheld == 2 && off.wait_ms == s.m.wait_ms,
          "no collectives measured: the model changed");
}

int main(void)
{
    test_one_bucket_no_overlap();
    test_perfect_overlap();
    test_comm_bound();
    test_ring_and_fit();
    test_floor();
    test_busy();
    test_grad_progress();
    test_fit_busy();
    test_comm_cpu();
    test_straggler();
    test_bad_config();
    test_interval_combine();
    test_interval_one();
    test_measured_wait();
    test_sync_bn_off();
    return test_finish();
}
