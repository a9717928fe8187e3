/* device.h — where the ranks compute and how they talk: the one place that decides
 * between CPU ranks and GPUs.
 *
 * From the options (--cpu N or --gpu LIST) it checks the GPUs before anything starts,
 * picks the main job's devices when none were named, and for one rank: binds a CPU rank
 * to its own cores, creates the backend (cpu, or cuda on the rank's GPU) and the comm
 * (shm, or NCCL through the rendezvous store), gives the probes their streams and writes
 * the device lines of meta.csv.  Nothing else in the trainer includes cuda/cuda_api.h or
 * asks whether a rank has a GPU: the rest talks to the backend and comm tables.
 *
 * Ranks sharing a GPU: --gpu may list a device more than once (0,0: two ranks on GPU 0).
 * NCCL refuses two ranks on one device, so such a job uses the shm comm with host staging
 * on every rank (comm/comm_staged.h: device buffers copied through host memory with the
 * backend's download and upload, as PyTorch's gloo does with CUDA tensors), which lets
 * the multi-rank reducer and SyncBatchNorm run on the CUDA backend of a 1-GPU machine. */
#ifndef DDPPROF_DEVICE_H
#define DDPPROF_DEVICE_H

#include "backend/backend.h" /* enum conv_algo */

#include <stddef.h>

struct comm;
struct probe_opts;
struct runlog;
struct store;

/* --comm: the collectives' transport (device_comm_open decides what auto means) */

#define TRAIN_MAX_GPUS 64

/* The options of the devices: where the ranks compute and how they talk. */
struct device_opts {
    int cpu_ranks;           /* --cpu N: CPU ranks (0: not given) */
    int ngpus;               /* --gpu LIST: 0 for CPU ranks; local rank i uses gpus[i] */
    int gpus[TRAIN_MAX_GPUS];
    int threads;             /* --threads: CPU backend threads per rank (0: cores / ranks) */
    int comm;                /* --comm: device_comm_name's index (0: auto, device.c decides) */
    enum conv_algo conv_algo; /* --conv-algo auto|direct|winograd (CPU ranks; backend.h) */
    int tf32;                /* --tf32 on|off: GPU ranks' fp32 convolutions may run TF32
                                (cuda_api.h backend_cuda_create_tf32); 0 off */
    int timeout_ms;          /* --timeout: any collective or rendezvous */
};

/* One rank's devices.  Owns be and comm (device_comm_close, device_close). */
struct device {
    struct backend *be; /* this rank's backend */
    struct comm *comm;  /* NULL until device_comm_open (a single process has none) */
    int gpu;            /* the CUDA device this rank computes on, -1 on CPU */
    int gpu_shared;     /* 1: --gpu lists some device twice: shm-staged, not NCCL */
    int timeout_ms;     /* of every collective of comm */
    int comm_choice;    /* --comm: an index of the comm registry (0: auto) */
    const char *comm_link; /* the registry's link of comm: "shm", "tcp", "nccl" */
    enum conv_algo conv_algo; /* --conv-algo (CPU ranks) */
    int tf32;           /* --tf32 (GPU ranks) */
    int local_world;    /* ranks on this host (all of them: shm can serve them) */
    int cpus_fit;       /* every local rank has CPUs of its own (its --threads, 1 on a GPU)
                           in the CPUs this process may use: a rank may poll a late peer */
    char cpus[256];     /* the CPUs this rank is bound to, "0 1" ("" when not bound) */
};

/* How many ranks o asks for: the GPUs of --gpu, else --cpu N, else 1. */
int device_ranks(const struct device_opts *o);

/* 1 when --gpu lists a device more than once (ranks share a GPU), else 0.  A property of
 * the whole job, so that every rank picks the same comm. */
int device_gpus_shared(const struct device_opts *o);

/* Before anything starts: every device of --gpu exists (and this build has CUDA).  0, or
 * -1 (error_set) with one line naming the device and how many there are.  0 for CPU ranks. */
int device_check(const struct device_opts *o);

/* The main job's devices when o names none (no --cpu, no --gpu): every visible GPU (at
 * most TRAIN_MAX_GPUS), else 2 CPU ranks (1 on a single core).  Returns 1 after filling
 * o's GPUs or CPU ranks and writing one line saying what it picked, without a newline,
 * into note; 0, changing nothing, when o names devices. */
int device_pick(struct device_opts *o, char *note, size_t cap);

/* Keep only the first device of o (the main job's baseline): its first GPU, or 1 CPU rank. */
void device_keep_first(struct device_opts *o);

/* The comms this build has, "shm gloo nccl" (for --version and the tests). */
void device_comms(char *buf, size_t cap);

/* --comm's choices: the i-th name of the comm registry ("auto", "shm", "gloo", "nccl"),
 * NULL past its end.  train_opts.comm holds the index. */
const char *device_comm_name(int i);
/* its index ("auto": 0), -1 when the registry has no such name */
int device_comm_index(const char *name);

/* gpus[0..n) as --gpu spells them, "0,1,3", into buf */
void device_format_gpus(char *buf, size_t cap, const int *gpus, int n);

/* "GPU 0,1" or "CPU ranks: 2", for the main job's lines. */
void device_describe(const struct device_opts *o, char *buf, size_t cap);

/* Rank local_rank of local_world on this host: bind a CPU rank to its own block of
 * o->threads cores when the blocks fit (before the backend starts its threads), then
 * create the backend: the cuda one on o->gpus[local_rank], or the cpu one with o->threads
 * threads.  0, or -1 (error_set) with nothing left open. */
int device_open(struct device *d, const struct device_opts *o, int rank, int local_rank,
                int local_world);

/* The comm of rank of world over store (the rendezvous at port, which names the shm
 * segment), as --comm says; auto: NCCL on a GPU (shm with host staging through the
 * backend, "shm-staged", on a GPU that ranks share), shm when every rank is on this host
 * (local_world == world and every rank's host name, published in the store, is this one's),
 * else gloo (TCP on the interface that reaches the store's host).
 * shm's segment name is published by rank 0 in the store as "shm_name".  A choice this
 * rank cannot use (nccl without a GPU, shm across hosts, gloo on a GPU) is one error line
 * saying what to pick.  0 or -1 (error_set). */
int device_comm_open(struct device *d, struct store *store, int rank, int world, int port);

/* The probes' view of the device: po->gpu and the compute and comm streams (NULL on CPU). */
void device_probe_opts(const struct device *d, struct probe_opts *po);

/* The device lines of meta.csv: device, the GPU and its libraries' versions, tf32 and the
 * cuDNN algorithm cache (GPU ranks), backend, comm and cpu_binding. */
void device_write_meta(const struct device *d, struct runlog *log);

/* Destroy the comm (it waits for nothing); device_close also the backend (and the comm,
 * if still open).  Both may be called again, and on a device that never opened. */
void device_comm_close(struct device *d);
void device_close(struct device *d);

#endif
