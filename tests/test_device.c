/* test_device.c — the one place that picks CPU ranks or GPUs (trainer/device.c), on a CPU:
 *
 * 1. rank counts, the main job's baseline device and the device words of its lines;
 * 2. a CPU rank: the cpu backend with no stream and a clean status, no GPU for the probes;
 * 3. its comm over a store (world 1): shm, with no stream, its segment name published in
 *    the store as "shm_name";
 * 4. --gpu where this machine has no such GPU: one error line, before anything starts;
 * 5. the main job's auto-pick: every GPU, else 2 CPU ranks (1 on one core);
 * 6. ranks sharing a GPU (--gpu 0,0): every rank's comm is shm with host staging through
 *    its backend ("shm-staged"), not NCCL; shown here with the cpu backend standing in for
 *    the GPU's (the staging itself is tested in test_comm_staged). */
#include "backend/backend.h"
#include "comm/comm.h"
#include "comm/comm_gloo.h"
#include "comm/store.h"
#include "common/error.h"
#include "device.h"
#include "launch/launcher.h"
#include "probes/probe.h"
#include "testutil.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

static void test_counts_and_words(void)
{
    struct device_opts o;
    memset(&o, 0, sizeof o);
    char words[128];
    CHECK(device_ranks(&o) == 1, "no device given: %d ranks, want 1", device_ranks(&o));
    o.cpu_ranks = 3;
    CHECK(device_ranks(&o) == 3, "--cpu 3: %d ranks", device_ranks(&o));
    device_describe(&o, words, sizeof words);
    CHECK(strcmp(words, "CPU ranks: 3") == 0, "--cpu 3 described as '%s'", words);
    device_keep_first(&o);
    CHECK(o.cpu_ranks == 1 && device_ranks(&o) == 1, "first of 3 CPU ranks: %d", o.cpu_ranks);

    memset(&o, 0, sizeof o);
    o.ngpus = 2;
    o.gpus[0] = 3;
    o.gpus[1] = 1;
    CHECK(device_ranks(&o) == 2, "--gpu 3,1: %d ranks", device_ranks(&o));
    device_describe(&o, words, sizeof words);
    CHECK(strcmp(words, "GPU 3,1") == 0, "--gpu 3,1 described as '%s'", words);
    device_keep_first(&o);
    CHECK(o.ngpus == 1 && o.gpus[0] == 3, "first of GPUs 3,1: %d GPU(s), GPU %d", o.ngpus,
          o.gpus[0]);
}

static void test_cpu_rank(void)
{
    struct device_opts o;
    memset(&o, 0, sizeof o);
    o.cpu_ranks = 1;
    o.threads = 1;
    o.timeout_ms = 10000;
    struct device d;
    CHECK(device_open(&d, &o, 0, 0, 1) == 0, "device_open on CPU: %s", error_get());
    if (!d.be)
        return;
    CHECK(strcmp(d.be->name, "cpu") == 0 && d.gpu == -1, "backend %s, gpu %d", d.be->name,
          d.gpu);
    CHECK(d.be->stream(d.be) == NULL, "the cpu backend has a stream");
    CHECK(d.be->status(d.be) == 0, "the cpu backend's status: %s", error_get());
    CHECK(d.cpus[0] == '\0', "one rank on its host is not bound, got '%s'", d.cpus);

    struct probe_opts po;
    probe_opts_default(&po);
    po.gpu = 1;
    po.compute_stream = po.comm_stream = &po;
    device_probe_opts(&d, &po);
    CHECK(po.gpu == 0 && po.compute_stream == NULL && po.comm_stream == NULL,
          "probes of a CPU rank: gpu %d, streams %p %p", po.gpu, po.compute_stream,
          po.comm_stream);

    int port = launcher_free_port();
    CHECK(port > 0, "free port: %s", error_get());
    struct store *st = port > 0 ? store_create("127.0.0.1", port, 1, 0, 1, 10000) : NULL;
    CHECK(st != NULL, "store on port %d: %s", port, error_get());
    if (st) {
        CHECK(device_comm_open(&d, st, 0, 1, port) == 0, "shm comm: %s", error_get());
        if (d.comm) {
            CHECK(strcmp(d.comm->name, "shm") == 0 && d.comm->world == 1, "comm %s of %d",
                  d.comm->name, d.comm->world);
            CHECK(d.comm->stream(d.comm) == NULL, "the shm comm has a stream");
            po.comm_host_staged = 1;
            device_probe_opts(&d, &po);
            CHECK(po.comm_stream == NULL, "probes got a comm stream on CPU");
            CHECK(po.comm_host_staged == 0, "the shm comm of CPU ranks taken for host-staged");
        }
        char name[64] = "", want[64];
        size_t len = 0;
        CHECK(store_get(st, "shm_name", name, sizeof name - 1, &len) == 0,
              "the shm comm's segment name is not in the store: %s", error_get());
        snprintf(want, sizeof want, "/ddpprof-%d-%d", (int)getpid(), port);
        CHECK(strcmp(name, want) == 0, "shm_name '%s', want '%s'", name, want);
        device_comm_close(&d);
        CHECK(d.comm == NULL, "comm left after device_comm_close");
        store_destroy(st);
    }
    device_close(&d);
    device_close(&d); /* again: nothing left to free */
    CHECK(d.be == NULL && d.comm == NULL, "device_close left something");
}

/* --comm: auto is shm on one host and gloo when the ranks span hosts (local_world <
 * world); explicit choices a CPU rank cannot use are one line saying what to pick. */
static void test_comm_choice(void)
{
    struct device_opts o;
    memset(&o, 0, sizeof o);
    o.cpu_ranks = 1;
    o.threads = 1;
    o.timeout_ms = 10000;
    struct device d;
    int port = launcher_free_port();
    struct store *st = port > 0 ? store_create("127.0.0.1", port, 1, 0, 1, 10000) : NULL;
    CHECK(st != NULL, "store on port %d: %s", port, error_get());
    if (!st)
        return;

    o.comm = device_comm_index("nccl");
    CHECK(device_open(&d, &o, 0, 0, 1) == 0, "device_open: %s", error_get());
    CHECK(device_comm_open(&d, st, 0, 1, port) == -1 && strstr(error_get(), "--comm nccl") &&
              strstr(error_get(), "GPU"),
          "--comm nccl on a CPU rank: %s", error_get());
    device_close(&d);

    /* auto, with this host holding 1 of 2 ranks: gloo would be picked; ask for shm */
    o.comm = device_comm_index("shm");
    CHECK(device_open(&d, &o, 0, 0, 1) == 0, "device_open: %s", error_get());
    CHECK(device_comm_open(&d, st, 0, 2, port) == -1 && strstr(error_get(), "one host") &&
              strstr(error_get(), "gloo"),
          "--comm shm across hosts: %s", error_get());
    device_close(&d);

    o.comm = device_comm_index("gloo");
    CHECK(device_open(&d, &o, 0, 0, 1) == 0, "device_open: %s", error_get());
    int rc = device_comm_open(&d, st, 0, 1, port);
    if (comm_gloo_available()) {
        CHECK(rc == 0 && d.comm && strcmp(d.comm->name, "gloo") == 0,
              "--comm gloo on one CPU rank: %s", rc ? error_get() : d.comm->name);
    } else {
        CHECK(rc == -1 && strstr(error_get(), "without Gloo"), "no Gloo: %s", error_get());
    }
    device_close(&d);
    store_destroy(st);

    /* auto, with a launcher that says nothing of hosts (local world = world): the host names
     * in the store decide; rank 1 on another host makes it gloo (which then waits for rank 1
     * in vain: a short timeout) */
    port = launcher_free_port();
    st = port > 0 ? store_create("127.0.0.1", port, 1, 0, 2, 500) : NULL;
    CHECK(st != NULL, "store on port %d: %s", port, error_get());
    if (!st)
        return;
    CHECK(store_set(st, "device/host/1", "elsewhere", 9) == 0, "set: %s", error_get());
    o.comm = device_comm_index("auto");
    o.timeout_ms = 500;
    CHECK(device_open(&d, &o, 0, 0, 2) == 0, "device_open: %s", error_get());
    rc = device_comm_open(&d, st, 0, 2, port);
    CHECK(rc == -1 && strstr(error_get(), "gloo"),
          "auto with rank 1 on another host: %s", rc ? error_get() : d.comm->name);
    device_close(&d);
    store_abort(st);
}

static void test_missing_gpu(void)
{
    struct device_opts o;
    memset(&o, 0, sizeof o);
    o.ngpus = 1;
    o.gpus[0] = 1000;
    error_clear();
    CHECK(device_check(&o) == -1, "--gpu 1000 passed device_check");
    const char *msg = error_get();
    CHECK(msg[0] && !strchr(msg, '\n') && (strstr(msg, "1000") || strstr(msg, "CUDA")),
          "device_check error: '%s'", msg);
    struct device d;
    o.gpus[0] = 1000;
    CHECK(device_open(&d, &o, 0, 0, 1) == -1 && d.be == NULL, "a rank opened GPU 1000");
    printf("--gpu 1000: %s\n", error_get());
    o.cpu_ranks = 0;
    o.ngpus = 1;
    CHECK(device_open(&d, &o, 1, 1, 2) == -1 && strstr(error_get(), "has no GPU"),
          "local rank 1 of --gpu with one device: '%s'", error_get());
    memset(&o, 0, sizeof o);
    CHECK(device_check(&o) == 0, "device_check of CPU ranks failed: %s", error_get());
}

static void test_pick(void)
{
    struct device_opts o;
    memset(&o, 0, sizeof o);
    char note[256] = "";
    o.cpu_ranks = 3;
    CHECK(device_pick(&o, note, sizeof note) == 0 && o.cpu_ranks == 3 && o.ngpus == 0,
          "--cpu 3 given, yet the auto-pick changed it to %d CPU ranks, %d GPUs", o.cpu_ranks,
          o.ngpus);
    o.cpu_ranks = 0;
    CHECK(device_pick(&o, note, sizeof note) == 1, "no device given and nothing picked");
    CHECK((o.ngpus > 0) != (o.cpu_ranks > 0), "picked %d GPUs and %d CPU ranks", o.ngpus,
          o.cpu_ranks);
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    if (o.cpu_ranks)
        CHECK(o.cpu_ranks == (cores >= 2 ? 2 : 1) && strstr(note, "no GPU found"),
              "%ld cores: %d CPU ranks, note '%s'", cores, o.cpu_ranks, note);
    CHECK(strstr(note, "(no --gpu or --cpu given)") && !strchr(note, '\n'), "note '%s'", note);
    printf("%s\n", note);
}

static void test_shared_gpu(void)
{
    struct device_opts o;
    memset(&o, 0, sizeof o);
    CHECK(!device_gpus_shared(&o), "CPU ranks share a GPU");
    o.ngpus = 2;
    o.gpus[0] = 0;
    o.gpus[1] = 1;
    CHECK(!device_gpus_shared(&o), "--gpu 0,1 shares a GPU");
    o.gpus[1] = 0;
    CHECK(device_gpus_shared(&o), "--gpu 0,0 shares none");
    o.ngpus = 3;
    o.gpus[0] = 1, o.gpus[1] = 0, o.gpus[2] = 1;
    CHECK(device_gpus_shared(&o), "--gpu 1,0,1 shares none (every rank must pick shm)");
    char words[64];
    o.ngpus = 2;
    o.gpus[0] = o.gpus[1] = 0;
    CHECK(device_ranks(&o) == 2, "--gpu 0,0: %d ranks", device_ranks(&o));
    device_describe(&o, words, sizeof words);
    CHECK(strcmp(words, "GPU 0,0") == 0, "--gpu 0,0 described as '%s'", words);

    /* the comm of a rank on a shared GPU: its backend is the cpu one here */
    struct device d;
    memset(&d, 0, sizeof d);
    d.be = backend_cpu_create(1);
    d.gpu = 0;
    d.gpu_shared = 1;
    d.local_world = 1; /* every rank of the world on this host */
    d.timeout_ms = 10000;
    CHECK(d.be != NULL, "cpu backend: %s", error_get());
    int port = launcher_free_port();
    struct store *st = d.be && port > 0 ? store_create("127.0.0.1", port, 1, 0, 1, 10000) : NULL;
    CHECK(st != NULL, "store on port %d: %s", port, error_get());
    if (st) {
        CHECK(device_comm_open(&d, st, 0, 1, port) == 0, "shared-GPU comm: %s", error_get());
        if (d.comm) {
            CHECK(strcmp(d.comm->name, "shm-staged") == 0 && d.comm->world == 1 &&
                      d.comm->stream(d.comm) == NULL && d.comm->order == NULL,
                  "comm %s of %d", d.comm->name, d.comm->world);
            float host[5] = {1, 2, 3, 4, 5}, back[5] = {0};
            float *buf = d.be->alloc(d.be, sizeof host);
            d.be->upload(d.be, buf, host, sizeof host);
            CHECK(comm_allreduce(d.comm, buf, 5, COMM_F32) == 0, "staged all-reduce: %s",
                  error_get());
            d.be->download(d.be, back, buf, sizeof back);
            CHECK(memcmp(host, back, sizeof host) == 0, "world-1 all-reduce changed the data");
            d.be->free(d.be, buf);
        }
        device_comm_close(&d);
        store_destroy(st);
    }
    device_close(&d);
}

int main(void)
{
    test_counts_and_words();
    test_cpu_rank();
    test_comm_choice();
    test_missing_gpu();
    test_pick();
    test_shared_gpu();
    return test_finish();
}
