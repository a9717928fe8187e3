/* run_format.h — meta.csv, the run's facts, written once: every key, its type, unit, who
 * writes it and what it means.  The trainer writes meta.csv through it (probes/runlog.h:
 * runlog_meta and runlog_meta_at take a key of these tables, never a string), the report
 * parses a meta.csv once into one typed struct expanded from the same tables
 * (report/input/meta.h), and probes/TRACE.md's "meta.csv" section is these tables printed
 * (tests/test_run_format.c checks that it is).
 *
 * Header-only and dependency-free, as trace_format.h beside it: report/ includes it and
 * links nothing of probes (cmake/layers.cmake: ddpprof_run_format).
 *
 * meta.csv is RFC 4180 CSV, a header line "key,value", then one key,value row per fact (a
 * repeated key: the last one counts).  Two kinds of keys:
 *   - fixed keys, RUN_META_KEYS: X(key, TYPE, unit, WHEN, meaning)
 *   - indexed keys, RUN_META_INDEXED: X(group, leaf, TYPE, unit, WHEN, meaning), one per
 *     bucket, layer, parameter, epoch, restart or rank: "bucket.3.bytes", "host.rank1"
 *     (RUN_META_GROUPS: how each group's keys are spelled and where its index starts)
 * TYPE: TEXT (any string), INT (a decimal integer, 64-bit: "-12"), NUM (a decimal number
 * as C's strtod reads it, the whole value: "0.25", "1e-3", "nan").
 * WHEN: ALL every run writes it; DDP every DDP run; CPU / GPU every run on CPU ranks / on
 * a GPU; FULL every run with --trace full; SOME when the meaning says; OLD written by
 * earlier versions only (read when present, so their run directories still read).
 * A key in neither table is not part of the format: the report warns and ignores it. */
#ifndef DDPPROF_RUN_FORMAT_H
#define DDPPROF_RUN_FORMAT_H

#include <stddef.h>
#include <stdio.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- fixed keys, in the order the trainer writes them ---- */
#define RUN_META_KEYS(X)                                                                     \
    X(run_id, TEXT, "", DDP,                                                                 \
      "the job and its attempt (`HOST-PID-TIME.RESTART`, or torchrun's id): the directories " \
      "of one run on several nodes share it")                                                \
    X(model, TEXT, "", ALL, "the model: `convnet`, `resnet18`")                              \
    X(resnet_width, INT, "channels", SOME,                                                   \
      "resnet18 only: its first stage's channels (--resnet-width)")                          \
    X(mode, TEXT, "", ALL, "`baseline` (one rank, no DDP) or `ddp`")                         \
    X(device, TEXT, "", ALL, "`cpu` or `cuda`")                                              \
    X(gpu, TEXT, "", GPU, "the GPU's name")                                                  \
    X(gpu_compute_capability, TEXT, "", GPU, "its compute capability, `MAJOR.MINOR`")        \
    X(cuda_driver, INT, "", GPU, "the CUDA driver's version (12080 = 12.8)")                 \
    X(cuda_runtime, INT, "", GPU, "the CUDA runtime's version")                              \
    X(cudnn, INT, "", GPU, "cuDNN's version (90800 = 9.8.0)")                                \
    X(cublas, INT, "", GPU, "cuBLAS's version (major * 10000 + minor * 100 + patch)")        \
    X(nccl, INT, "", GPU, "NCCL's version (22809 = 2.28.9)")                                 \
    X(tf32, TEXT, "", GPU, "`on` or `off`: fp32 convolutions in TF32 (GEMMs never are)")     \
    X(half_layout, TEXT, "", GPU,                                                            \
      "`nhwc` (channels-last, the default) or `nchw` (DDPPROF_CHANNELS_LAST=0): 4-D fp16/bf16 tensors") \
    X(cudnn_algo_cache, TEXT, "", GPU,                                                       \
      "the file keeping cuDNN's algorithm choices, or `off` (trainer/cuda/conv_cache.h)")    \
    X(backend, TEXT, "", ALL, "the backend ops table: `cpu` or `cuda`")                      \
    X(conv_algo, TEXT, "", CPU, "--conv-algo, the CPU convolutions' choice")                 \
    X(cpu_kernels, TEXT, "", CPU, "what the CPU convolutions and max pooling run on this host") \
    X(comm, TEXT, "", ALL, "the comm: `shm`, `gloo`, `nccl`, `shm-staged`, or `none`")       \
    X(comm_link, TEXT, "", ALL,                                                              \
      "what carries the comm's bytes: `shm` (memory), `tcp`, `nccl`, or `none`; runs before " \
      "2026-12-07 lack it")                                                                  \
    X(comm_progress, TEXT, "", ALL,                                                          \
      "`gradient`: the comm's threads run when the reducer calls them after each gradient; " \
      "`none`")                                                                              \
    X(cpu_binding, TEXT, "", ALL, "the CPUs the rank is bound to (`0 1`), or `none`")        \
    X(world_size, INT, "ranks", ALL, "the ranks of the run")                                 \
    X(threads_per_rank, INT, "threads", ALL, "the compute threads of each rank")             \
    X(dataset, TEXT, "", ALL, "the data set's format: `idx`, `cifar` or `synthetic`")        \
    X(data, TEXT, "", ALL, "its directory, or `synthetic`")                                  \
    X(train_samples, INT, "images", ALL, "the training images used (--limit)")               \
    X(test_samples, INT, "images", ALL, "the test images used (--test-limit)")               \
    X(batch_size, INT, "images", ALL, "the batch of one rank")                               \
    X(global_batch_size, INT, "images", ALL, "the batch of all ranks: batch_size x world_size") \
    X(epochs, INT, "", ALL, "the epochs asked for")                                          \
    X(drop_last, INT, "", ALL, "1: the sampler drops the last incomplete batch")             \
    X(optimizer, TEXT, "", ALL, "`sgd` or `adam`")                                           \
    X(lr, NUM, "", ALL, "the learning rate the run used (scaled by the world when asked)")   \
    X(lr_scale_by_world, INT, "", ALL, "1: the learning rate was multiplied by world_size")  \
    X(momentum, NUM, "", ALL, "SGD's momentum")                                              \
    X(weight_decay, NUM, "", ALL, "the weight decay")                                        \
    X(seed, INT, "", ALL, "the shuffling and initialisation seed")                           \
    X(shuffle, INT, "", ALL, "1: the sampler shuffles every epoch")                          \
    X(normalize, TEXT, "", ALL, "the input normalisation, `MEAN,STD` per channel, `;` between") \
    X(amp, TEXT, "", ALL, "mixed precision: `off`, `fp16` or `bf16`")                        \
    X(resume, TEXT, "", ALL, "the checkpoint resumed from (--resume), or empty")             \
    X(trace, TEXT, "", ALL, "--trace: `off`, `nvtx`, `kernels` or `full`")                   \
    X(cupti, TEXT, "", SOME, "on a GPU where CUPTI does not trace: why")                     \
    X(sync_bn, INT, "", DDP, "1: BatchNorm is SyncBatchNorm")                                \
    X(bucket_cap_mb, NUM, "MiB", DDP, "the reducer's bucket cap (--bucket-cap-mb)")          \
    X(buckets, INT, "", DDP, "the reducer's gradient buckets (bucket.K.*)")                  \
    X(init, TEXT, "", ALL, "the initial weights' file (--init), or empty")                   \
    X(ddpprof_version, TEXT, "", ALL, "ddpprof's version")                                   \
    X(git_revision, TEXT, "", ALL, "the source's git revision (empty outside a checkout)")   \
    X(openblas, TEXT, "", ALL, "OpenBLAS's configuration")                                   \
    X(hostname, TEXT, "", ALL, "the host of the rank writing meta.csv")                      \
    X(start_time, INT, "s", ALL, "when the run started, Unix time")                          \
    X(host_cores, INT, "cores", ALL, "the host's online cores")                              \
    X(host_load_start, NUM, "", ALL, "the host's 1-minute load average at the start")        \
    X(layers, INT, "", FULL, "the model's layers (layer.K.*)")                               \
    X(peak_gflops, NUM, "GFLOP/s", FULL,                                                     \
      "the device's peak, measured at the start by a short sgemm (absent when it failed)")   \
    X(peak_gbps, NUM, "GB/s", FULL, "the same by a copy")                                    \
    X(peak_source, TEXT, "", FULL, "what measured the peak")                                 \
    X(node_rank, INT, "", DDP, "the node of the directory's meta.csv (0: rank 0's)")         \
    X(local_world_size, INT, "ranks", DDP, "the ranks on that node")                         \
    X(restarts, INT, "", DDP, "the job's restarts before this attempt (--max-restarts)")     \
    X(resumed_epoch, INT, "", SOME, "a resumed run (--resume): the epoch it resumed in")     \
    X(resumed_step, INT, "", SOME, "... and the step")                                       \
    X(checkpoint_every, INT, "steps", SOME, "--checkpoint-every")                            \
    X(ranks_cpu_s, NUM, "s", ALL, "the CPU time of the ranks on rank 0's host")              \
    X(host_load_end, NUM, "", ALL, "the host's 1-minute load average at the end")            \
    X(host_busy_s, NUM, "s", ALL,                                                            \
      "the CPU time every process of the host used meanwhile (/proc/stat; absent without it)") \
    X(host_steal_s, NUM, "s", ALL, "the CPU time the hypervisor stole meanwhile")            \
    X(final_accuracy, NUM, "", ALL, "the last epoch's test accuracy (0..1)")                 \
    X(steps, INT, "", ALL, "the optimizer steps the run took (absent: it did not finish)")   \
    X(wall_s, NUM, "s", ALL, "the run's wall time, setup to end")                            \
    X(accuracy_epoch, TEXT, "", OLD,                                                         \
      "before epoch.E.*: `EPOCH,ACCURACY,TRAIN_S`, one row per epoch")

/* ---- indexed keys: G(group, SHAPE, first index, what the index counts) ----
 * SHAPE DOTTED: "GROUP.K.LEAF" ("bucket.3.bytes"); RANKED: "LEAF.rankK" ("host.rank1").
 * K is a decimal integer from `first`, written without sign or leading zeros. */
#define RUN_META_GROUPS(G)                                                                   \
    G(bucket, DOTTED, 0, "K: a DDP gradient bucket, in launch order (bucket 0 holds the "   \
                         "last parameters)")                                                 \
    G(layer, DOTTED, 0, "K: a model layer, in forward order")                                \
    G(param, DOTTED, 0, "I: a trainable parameter, in model order")                          \
    G(epoch, DOTTED, 1, "E: an epoch, from 1")                                               \
    G(restart, DOTTED, 1, "K: a restart of the job, from 1")                                 \
    G(rank, RANKED, 0, "N: a global rank")

/* X(group, leaf, TYPE, unit, WHEN, meaning) */
#define RUN_META_INDEXED(X)                                                                  \
    X(bucket, params, INT, "", DDP, "the bucket's parameter tensors")                        \
    X(bucket, bytes, INT, "bytes", DDP, "its gradients' bytes")                              \
    X(layer, name, TEXT, "", FULL, "the layer's PyTorch module name (`layer1.0`)")           \
    X(layer, type, TEXT, "", FULL,                                                           \
      "`conv`, `batchnorm`, `relu`, `maxpool`, `avgpool`, `linear` or `add`")                \
    X(layer, param_bytes, INT, "bytes", FULL, "its parameters' bytes")                       \
    X(layer, flops_forward, NUM, "FLOP", FULL,                                               \
      "its forward's FLOPs per rank and step at the run's batch (report/FORMULAS.md)")       \
    X(layer, flops_backward, NUM, "FLOP", FULL, "... its backward's")                        \
    X(layer, bytes_forward, NUM, "bytes", FULL, "the tensor bytes its forward reads and writes") \
    X(layer, bytes_backward, NUM, "bytes", FULL, "... its backward")                         \
    X(param, name, TEXT, "", FULL, "the parameter's name (`fc.bias`)")                       \
    X(param, bytes, INT, "bytes", FULL, "its fp32 bytes")                                    \
    X(epoch, train_s, NUM, "s", ALL, "the epoch's training time")                            \
    X(epoch, accuracy, NUM, "", ALL, "its test accuracy (0..1; rank 0's directory only)")    \
    X(epoch, val_loss, NUM, "", ALL, "its test loss (rank 0's directory only)")              \
    X(epoch, train_loss, NUM, "", ALL, "its mean training loss")                             \
    X(restart, cause, TEXT, "", SOME, "why that attempt failed, as the node agent saw it")   \
    X(rank, clock_offset_ns, INT, "ns", DDP,                                                 \
      "the rank's clock offset to rank 0's (probes/TRACE.md \"Clock alignment\")")           \
    X(rank, clock_rtt_ns, INT, "ns", DDP, "the round trip that offset was measured in")     \
    X(rank, host, TEXT, "", DDP, "the rank's host")                                          \
    X(rank, cpu_s, NUM, "s", DDP, "the rank's CPU time")                                     \
    X(rank, wall_s, NUM, "s", DDP, "its wall time")

/* ---- the enums and names ---- */

enum run_meta_type { RUN_META_TEXT, RUN_META_INT, RUN_META_NUM };
enum run_meta_when {
    RUN_META_ALL, RUN_META_DDP, RUN_META_CPU, RUN_META_GPU, RUN_META_FULL, RUN_META_SOME,
    RUN_META_OLD
};
enum run_meta_shape { RUN_META_DOTTED, RUN_META_RANKED };

/* fixed keys: RUN_META_world_size ...; RUN_META_NONE (0) is no key */
#define RUN_META_KEY_ENUM_(key, type, unit, when, doc) RUN_META_##key,
enum run_meta_key { RUN_META_NONE, RUN_META_KEYS(RUN_META_KEY_ENUM_) RUN_META_KEY_END };
#undef RUN_META_KEY_ENUM_
#define RUN_META_KEY_COUNT (RUN_META_KEY_END - 1)

#define RUN_META_GROUP_ENUM_(group, shape, first, doc) RUN_META_GROUP_##group,
enum run_meta_group { RUN_META_GROUPS(RUN_META_GROUP_ENUM_) RUN_META_GROUP_COUNT };
#undef RUN_META_GROUP_ENUM_

/* indexed keys: RUN_META_bucket_bytes, RUN_META_rank_host ... */
#define RUN_META_INDEXED_ENUM_(group, leaf, type, unit, when, doc) RUN_META_##group##_##leaf,
enum run_meta_indexed { RUN_META_INDEXED(RUN_META_INDEXED_ENUM_) RUN_META_INDEXED_COUNT };
#undef RUN_META_INDEXED_ENUM_

/* One row of either table. */
struct run_meta_spec {
    const char *key;  /* a fixed key; an indexed key's leaf */
    enum run_meta_type type;
    const char *unit; /* "" for none */
    enum run_meta_when when;
    const char *doc;
    int group;        /* indexed keys: enum run_meta_group; fixed keys: -1 */
};

struct run_meta_group_spec {
    const char *name;
    enum run_meta_shape shape;
    int first;
    const char *doc;
};

/* the fixed keys' specs, indexed by enum run_meta_key (entry 0, RUN_META_NONE, is empty) */
static inline const struct run_meta_spec *run_meta_keys(void)
{
#define RUN_META_SPEC_(key, type, unit, when, doc)                                           \
    {#key, RUN_META_##type, unit, RUN_META_##when, doc, -1},
    static const struct run_meta_spec specs[] = {
        {NULL, RUN_META_TEXT, "", RUN_META_OLD, NULL, -1}, RUN_META_KEYS(RUN_META_SPEC_)};
#undef RUN_META_SPEC_
    return specs;
}

/* the indexed keys' specs, indexed by enum run_meta_indexed */
static inline const struct run_meta_spec *run_meta_indexed_keys(void)
{
#define RUN_META_ISPEC_(group, leaf, type, unit, when, doc)                                  \
    {#leaf, RUN_META_##type, unit, RUN_META_##when, doc, RUN_META_GROUP_##group},
    static const struct run_meta_spec specs[] = {RUN_META_INDEXED(RUN_META_ISPEC_)};
#undef RUN_META_ISPEC_
    return specs;
}

static inline const struct run_meta_group_spec *run_meta_groups(void)
{
#define RUN_META_GSPEC_(group, shape, first, doc) {#group, RUN_META_##shape, first, doc},
    static const struct run_meta_group_spec specs[] = {RUN_META_GROUPS(RUN_META_GSPEC_)};
#undef RUN_META_GSPEC_
    return specs;
}

/* The text of a fixed key ("world_size"); NULL for RUN_META_NONE or out of range. */
static inline const char *run_meta_key_name(int key)
{
    return key > RUN_META_NONE && key < RUN_META_KEY_END ? run_meta_keys()[key].key : NULL;
}

/* "integer", "number", "text" */
static inline const char *run_meta_type_name(enum run_meta_type t)
{
    return t == RUN_META_INT ? "integer" : t == RUN_META_NUM ? "number" : "text";
}

/* The key of indexed key k for index ("bucket.3.bytes", "host.rank1") into buf (cut to
 * cap); the length snprintf gives. */
static inline int run_meta_key_at(char *buf, size_t cap, enum run_meta_indexed k, int index)
{
    const struct run_meta_spec *s = &run_meta_indexed_keys()[k];
    const struct run_meta_group_spec *g = &run_meta_groups()[s->group];
    return g->shape == RUN_META_RANKED ? snprintf(buf, cap, "%s.rank%d", s->key, index)
                                       : snprintf(buf, cap, "%s.%d.%s", g->name, index, s->key);
}

/* The fixed key named s, or RUN_META_NONE. */
static inline enum run_meta_key run_meta_key_of(const char *s)
{
    for (int k = RUN_META_NONE + 1; k < RUN_META_KEY_END; k++)
        if (strcmp(run_meta_keys()[k].key, s) == 0)
            return (enum run_meta_key)k;
    return RUN_META_NONE;
}

/* s[0..len) as an index: decimal digits without a leading zero (but "0"), at most 9; -1
 * when it is not one */
static inline int run_meta_index_(const char *s, size_t len)
{
    if (len == 0 || len > 9 || (s[0] == '0' && len > 1))
        return -1;
    int v = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        v = v * 10 + (s[i] - '0');
    }
    return v;
}

/* The indexed key spelled s ("bucket.3.bytes") and its index (*index, at least its group's
 * first), or -1 when s is none. */
static inline int run_meta_indexed_of(const char *s, int *index)
{
    const size_t len = strlen(s);
    for (int k = 0; k < RUN_META_INDEXED_COUNT; k++) {
        const struct run_meta_spec *spec = &run_meta_indexed_keys()[k];
        const struct run_meta_group_spec *g = &run_meta_groups()[spec->group];
        const size_t leaf = strlen(spec->key);
        const char *num;
        size_t nlen;
        if (g->shape == RUN_META_RANKED) { /* LEAF.rankN */
            if (len <= leaf + 5 || strncmp(s, spec->key, leaf) != 0 ||
                strncmp(s + leaf, ".rank", 5) != 0)
                continue;
            num = s + leaf + 5;
            nlen = len - leaf - 5;
        } else { /* GROUP.N.LEAF */
            const size_t gl = strlen(g->name);
            if (len <= gl + leaf + 2 || strncmp(s, g->name, gl) != 0 || s[gl] != '.' ||
                strcmp(s + len - leaf, spec->key) != 0 || s[len - leaf - 1] != '.')
                continue;
            num = s + gl + 1;
            nlen = len - leaf - 1 - (gl + 1);
        }
        const int v = run_meta_index_(num, nlen);
        if (v >= g->first) {
            *index = v;
            return k;
        }
    }
    return -1;
}

#ifdef __cplusplus
}
#endif
#endif
