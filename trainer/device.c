/* device.c — CPU ranks or GPUs, decided once (see device.h). */
#include "device.h"

#include "backend/backend.h"
#include "backend/backend_cpu.h"
#include "comm/comm.h"
#include "comm/comm_gloo.h"
#include "comm/comm_shm.h"
#include "comm/comm_staged.h"
#include "comm/store.h"
#include "common/error.h"
#include "cuda/cuda_api.h"
#include "probes/probe.h"
#include "probes/runlog.h"

#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* the shm comm's per-rank slot: larger collectives move in chunks of half of it */
#define DEVICE_SHM_BYTES ((size_t)4 << 20)

int device_ranks(const struct device_opts *o)
{
    return o->ngpus ? o->ngpus : o->cpu_ranks > 0 ? o->cpu_ranks : 1;
}

int device_gpus_shared(const struct device_opts *o)
{
    for (int i = 0; i < o->ngpus; i++)
        for (int j = 0; j < i; j++)
            if (o->gpus[i] == o->gpus[j])
                return 1;
    return 0;
}

int device_check(const struct device_opts *o)
{
    if (!o->ngpus)
        return 0;
    int count = cuda_device_count();
    if (count < 0)
        return -1;
    for (int i = 0; i < o->ngpus; i++)
        if (o->gpus[i] >= count)
            return error_set("--gpu: device %d does not exist (%d CUDA device%s visible%s)",
                             o->gpus[i], count, count == 1 ? "" : "s",
                             count ? "" : ": no GPU or no driver; use --cpu N");
    return 0;
}

void device_format_gpus(char *buf, size_t cap, const int *gpus, int n)
{
    size_t at = 0;
    buf[0] = '\0';
    for (int i = 0; i < n && at < cap; i++) {
        int w = snprintf(buf + at, cap - at, "%s%d", i ? "," : "", gpus[i]);
        if (w < 0)
            break;
        at += (size_t)w;
    }
}

int device_pick(struct device_opts *o, char *note, size_t cap)
{
    if (o->ngpus || o->cpu_ranks)
        return 0;
    int count = cuda_device_count();
    error_clear(); /* a build without CUDA: no GPU, not an error */
    if (count > 0) {
        char list[256];
        o->cpu_ranks = 0;
        o->ngpus = count < TRAIN_MAX_GPUS ? count : TRAIN_MAX_GPUS;
        for (int i = 0; i < o->ngpus; i++)
            o->gpus[i] = i;
        device_format_gpus(list, sizeof list, o->gpus, o->ngpus);
        snprintf(note, cap, "ddpprof: using GPU%s %s (no --gpu or --cpu given)",
                 count > 1 ? "s" : "", list);
        return 1;
    }
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    o->ngpus = 0;
    o->cpu_ranks = cores >= 2 ? 2 : 1;
    snprintf(note, cap, "ddpprof: no GPU found: using %d CPU rank%s (no --gpu or --cpu given)",
             o->cpu_ranks, o->cpu_ranks > 1 ? "s" : "");
    return 1;
}

void device_keep_first(struct device_opts *o)
{
    if (o->ngpus)
        o->ngpus = 1;
    else
        o->cpu_ranks = 1;
}

void device_describe(const struct device_opts *o, char *buf, size_t cap)
{
    if (o->ngpus) {
        char list[256];
        device_format_gpus(list, sizeof list, o->gpus, o->ngpus);
        snprintf(buf, cap, "GPU %s", list);
    } else {
        snprintf(buf, cap, "CPU ranks: %d", device_ranks(o));
    }
}

/* Whether the local ranks' blocks of `threads` CPUs each fit in the CPUs this process may
 * use (its affinity mask, which taskset or a container's cpuset narrow): 1 or 0 */
static int device_cpus_fit(int threads, int local_world, cpu_set_t *allowed)
{
    if (sched_getaffinity(0, sizeof *allowed, allowed))
        return 0;
    return threads >= 1 && local_world * threads <= CPU_COUNT(allowed);
}

/* CPU ranks sharing a host each get their own block of `threads` CPUs from the allowed
 * set (like mpirun --bind-to core), so a rank's comm thread and compute never land on
 * another rank's core: measured ~8% faster DDP epochs on 2 cores.  Skipped (nothing
 * pinned) when the blocks do not fit.  Writes the CPU list into cpus (for meta.csv). */
static void device_bind_cpus(int threads, int local_rank, int local_world, char *cpus,
                             size_t cap)
{
    cpus[0] = '\0';
    cpu_set_t allowed, mine;
    if (local_world < 2 || !device_cpus_fit(threads, local_world, &allowed))
        return;
    int want = threads;
    CPU_ZERO(&mine);
    int seen = 0, first = local_rank * want, at = 0;
    for (int cpu = 0; cpu < CPU_SETSIZE && seen < first + want; cpu++) {
        if (!CPU_ISSET(cpu, &allowed))
            continue;
        if (seen++ < first)
            continue;
        CPU_SET(cpu, &mine);
        at += snprintf(cpus + at, cap - (size_t)at, "%s%d", at ? " " : "", cpu);
        if ((size_t)at >= cap)
            break;
    }
    if (sched_setaffinity(0, sizeof mine, &mine))
        cpus[0] = '\0';
}

int device_open(struct device *d, const struct device_opts *o, int rank, int local_rank,
                int local_world)
{
    memset(d, 0, sizeof *d);
    d->gpu = -1;
    d->timeout_ms = o->timeout_ms;
    d->comm_choice = o->comm;
    d->conv_algo = o->conv_algo;
    d->tf32 = o->tf32;
    d->local_world = local_world;
    cpu_set_t allowed;
    d->cpus_fit = device_cpus_fit(o->ngpus || o->threads < 1 ? 1 : o->threads, local_world,
                                  &allowed);
    if (o->ngpus) {
        if (local_rank >= o->ngpus)
            return error_set("rank %d (local rank %d) has no GPU: --gpu lists %d", rank,
                             local_rank, o->ngpus);
        d->gpu = o->gpus[local_rank];
        d->gpu_shared = device_gpus_shared(o);
        d->be = backend_cuda_create_tf32(d->gpu, o->tf32);
    } else {
        device_bind_cpus(o->threads, local_rank, local_world, d->cpus, sizeof d->cpus);
        d->be = backend_cpu_create_algo(o->threads, o->conv_algo);
    }
    return d->be ? 0 : -1;
}

/* the backend's copies as the staged comm's (called on the rank's thread only) */
static int device_stage_download(void *ctx, void *host_dst, const void *dev_src, size_t bytes)
{
    struct backend *be = ctx;
    be->download(be, host_dst, dev_src, bytes);
    return be->status(be); /* download waited for the device: covers everything queued */
}

static int device_stage_upload(void *ctx, void *dev_dst, const void *host_src, size_t bytes)
{
    struct backend *be = ctx;
    be->upload(be, dev_dst, host_src, bytes);
    return be->status(be);
}

/* *one = 1 when every rank of world runs on this host, by host name through the store (a
 * launcher that does not say how many ranks share a host, e.g. Slurm without
 * SLURM_NTASKS_PER_NODE, leaves local_world at world).  0 or -1 (error_set). */
static int device_one_host(struct store *store, int rank, int world, int *one)
{
    char host[256] = "", other[256], key[64];
    size_t len = 0;
    gethostname(host, sizeof host - 1);
    snprintf(key, sizeof key, "device/host/%d", rank);
    if (store_set(store, key, host, strlen(host)))
        return -1;
    *one = 1;
    for (int k = 0; k < world && *one; k++) {
        snprintf(key, sizeof key, "device/host/%d", k);
        if (store_get(store, key, other, sizeof other - 1, &len))
            return -1;
        other[len] = '\0';
        *one = strcmp(other, host) == 0;
    }
    return 0;
}

/* the registry's checks: whether this rank can use a comm (0), else one line saying what
 * to pick (-1, error_set) */
static int device_nccl_check(const struct device *d, int world)
{
    (void)world;
    if (d->gpu < 0)
        return error_set("--comm nccl needs GPU ranks (--gpu LIST); CPU ranks use "
                         "shm or gloo");
    if (d->gpu_shared)
        return error_set("--gpu lists GPU %d more than once, and NCCL needs a GPU per "
                         "rank: use --comm shm (host-staged) or auto", d->gpu);
    return 0;
}

static int device_gloo_check(const struct device *d, int world)
{
    (void)world;
    if (d->gpu >= 0)
        return error_set("--comm gloo moves host memory: GPU ranks use nccl");
    return 0;
}

static int device_shm_check(const struct device *d, int world)
{
    if (d->local_world < world)
        return error_set("--comm shm needs every rank on one host, but this host has "
                         "%d of the %d ranks: use --comm gloo (or auto)", d->local_world, world);
    return 0;
}

static int device_always(void) { return 1; }

static struct comm *device_nccl_create(struct device *d, struct store *store, int rank,
                                       int world, int port)
{
    (void)port;
    return comm_nccl_create(d->be, store, rank, world, d->timeout_ms);
}

static struct comm *device_gloo_create(struct device *d, struct store *store, int rank,
                                       int world, int port)
{
    (void)port;
    return comm_gloo_create(store, "gloo/", rank, world, store_host(store), d->timeout_ms);
}

/* shm's segment name is rank 0's, published in the store; on a GPU, device buffers go
 * through host copies (shm-staged) */
static struct comm *device_shm_create(struct device *d, struct store *store, int rank,
                                      int world, int port)
{
    char name[64];
    size_t len = 0;
    if (rank == 0) {
        snprintf(name, sizeof name, "/ddpprof-%d-%d", (int)getpid(), port);
        if (store_set(store, "shm_name", name, strlen(name) + 1))
            return NULL;
    } else if (store_get(store, "shm_name", name, sizeof name - 1, &len)) {
        return NULL; /* the store's message names the rank; main prefixes it too */
    }
    name[rank == 0 ? strlen(name) : len] = '\0';
    struct comm *c = comm_shm_create(rank, world, name, DEVICE_SHM_BYTES, d->timeout_ms);
    if (c) /* a rank polls for a late peer only where every rank has its CPUs */
        comm_shm_set_polling(c, d->cpus_fit);
    if (c && d->gpu >= 0) { /* device buffers: through host copies */
        const struct comm_stage stage = {device_stage_download, device_stage_upload, d->be};
        c = comm_staged_create(c, &stage);
    }
    return c;
}

/* The comm registry: --comm's choices in this order (train_opts.comm is an index; 0,
 * "auto", is resolved by device_comm_pick from what each row serves).  A new transport is
 * its file (and header), one line here and, where its source needs a condition, CMake. */
enum {
    SERVES_ONE_HOST = 1,   /* CPU ranks all on this host */
    SERVES_HOSTS = 2,      /* CPU ranks across hosts */
    SERVES_GPU = 4,        /* one GPU a rank */
    SERVES_GPU_SHARED = 8, /* ranks sharing a GPU (through host copies) */
};

struct device_comm {
    const char *name;
    int serves;       /* SERVES_*: what --comm auto picks it for, the first row that does */
    const char *link; /* what carries its bytes, meta.csv's comm_link: "shm" (memory),
                         "tcp" (a link's rate of which TCP carries 1448/1547 as payload:
                         report/FORMULAS.md), "nccl" */
    int (*available)(void); /* this build has it (else create fails with one line) */
    int (*check)(const struct device *d, int world);
    struct comm *(*create)(struct device *d, struct store *store, int rank, int world,
                           int port); /* NULL + error_set */
};

static const struct device_comm device_comm_registry[] = {
    {"auto", 0, NULL, device_always, NULL, NULL},
    {"shm", SERVES_ONE_HOST | SERVES_GPU_SHARED, "shm", device_always, device_shm_check,
     device_shm_create},
    {"gloo", SERVES_HOSTS, "tcp", comm_gloo_available, device_gloo_check, device_gloo_create},
    {"nccl", SERVES_GPU, "nccl", cuda_build_enabled, device_nccl_check, device_nccl_create},
};
#define DEVICE_NCOMMS (int)(sizeof device_comm_registry / sizeof device_comm_registry[0])

const char *device_comm_name(int i)
{
    return i >= 0 && i < DEVICE_NCOMMS ? device_comm_registry[i].name : NULL;
}

int device_comm_index(const char *name)
{
    for (int i = 0; i < DEVICE_NCOMMS; i++)
        if (strcmp(device_comm_registry[i].name, name) == 0)
            return i;
    return -1;
}

void device_comms(char *buf, size_t cap)
{
    size_t at = 0;
    buf[0] = '\0';
    for (int i = 1; i < DEVICE_NCOMMS && at < cap; i++) {
        if (!device_comm_registry[i].available())
            continue;
        int w = snprintf(buf + at, cap - at, "%s%s", at ? " " : "", device_comm_registry[i].name);
        if (w < 0)
            break;
        at += (size_t)w;
    }
}

/* What --comm auto means for this rank: nccl on a GPU (shm, host-staged, on a GPU that
 * ranks share), shm when every rank is on this host, gloo when they span hosts.  NULL
 * (error_set) when the store cannot say. */
static const struct device_comm *device_comm_pick(const struct device *d, struct store *store,
                                                  int rank, int world)
{
    if (d->comm_choice > 0 && d->comm_choice < DEVICE_NCOMMS)
        return &device_comm_registry[d->comm_choice];
    int need;
    if (d->gpu >= 0) /* ranks sharing a GPU: NCCL cannot, shm through host copies can */
        need = d->gpu_shared ? SERVES_GPU_SHARED : SERVES_GPU;
    else if (d->local_world < world)
        need = SERVES_HOSTS;
    else {
        int one = 0;
        if (world > 1 && device_one_host(store, rank, world, &one))
            return NULL;
        need = world == 1 || one ? SERVES_ONE_HOST : SERVES_HOSTS;
    }
    for (int i = 1; i < DEVICE_NCOMMS; i++)
        if (device_comm_registry[i].serves & need)
            return &device_comm_registry[i];
    return error_set("no comm in the registry serves these ranks"), NULL;
}

int device_comm_open(struct device *d, struct store *store, int rank, int world, int port)
{
    const struct device_comm *pick = device_comm_pick(d, store, rank, world);
    if (!pick)
        return error_wrap("picking the comm");
    if (pick->check(d, world))
        return -1;
    d->comm = pick->create(d, store, rank, world, port);
    d->comm_link = pick->link;
    return d->comm ? 0 : -1;
}

void device_probe_opts(const struct device *d, struct probe_opts *po)
{
    po->gpu = d->gpu >= 0;
    po->compute_stream = d->be->stream(d->be);
    po->comm_stream = d->comm ? d->comm->stream(d->comm) : NULL;
    po->comm_host_staged = d->comm && strcmp(d->comm->name, COMM_STAGED_NAME) == 0;
}

void device_write_meta(const struct device *d, struct runlog *l)
{
    runlog_meta(l, RUN_META_device, "%s", d->gpu >= 0 ? "cuda" : "cpu");
    struct cuda_info ci;
    if (d->gpu >= 0 && cuda_info_get(d->gpu, &ci) == 0) {
        runlog_meta(l, RUN_META_gpu, "%s", ci.device_name);
        runlog_meta(l, RUN_META_gpu_compute_capability, "%d.%d", ci.cc_major, ci.cc_minor);
        runlog_meta(l, RUN_META_cuda_driver, "%d", ci.driver_version);
        runlog_meta(l, RUN_META_cuda_runtime, "%d", ci.runtime_version);
        runlog_meta(l, RUN_META_cudnn, "%zu", ci.cudnn_version);
        runlog_meta(l, RUN_META_cublas, "%d", ci.cublas_version);
        runlog_meta(l, RUN_META_nccl, "%d", ci.nccl_version);
        /* fp32 convolutions' math (GEMMs are never TF32), and where cuDNN's choices are kept */
        runlog_meta(l, RUN_META_tf32, "%s", d->tf32 ? "on" : "off");
        runlog_meta(l, RUN_META_half_layout, "%s",
                    d->be->layout(d->be, DT_F16) == LAYOUT_NHWC ? "nhwc" : "nchw");
        runlog_meta(l, RUN_META_cudnn_algo_cache, "%s", ci.cudnn_algo_cache);
    }
    runlog_meta(l, RUN_META_backend, "%s", d->be->name);
    if (d->gpu < 0) { /* the choice, and what it runs on this machine */
        runlog_meta(l, RUN_META_conv_algo, "%s", conv_algo_name(d->conv_algo));
        runlog_meta(l, RUN_META_cpu_kernels, "%s", backend_cpu_describe(d->be));
    }
    runlog_meta(l, RUN_META_comm, "%s", d->comm ? d->comm->name : "none");
    runlog_meta(l, RUN_META_comm_link, "%s", d->comm && d->comm_link ? d->comm_link : "none");
    /* the reducer calls the comm's progress after each gradient (comm.h): its threads share
     * the rank's cores and run between layers (report/FORMULAS.md "Predictions") */
    runlog_meta(l, RUN_META_comm_progress, "%s", d->comm && d->comm->progress ? "gradient" : "none");
    runlog_meta(l, RUN_META_cpu_binding, "%s", d->cpus[0] ? d->cpus : "none");
}

void device_comm_close(struct device *d)
{
    if (d->comm)
        d->comm->destroy(d->comm);
    d->comm = NULL;
}

void device_close(struct device *d)
{
    device_comm_close(d);
    if (d->be)
        d->be->destroy(d->be);
    d->be = NULL;
}
