/* nccl_stub.c — a test double of libnccl: the NCCL calls that the NCCL comm
 * (trainer/comm/cuda/comm_nccl.c) makes, for ranks in separate processes on one host, so
 * that the comm's logic for two ranks or more runs on a machine without GPUs
 * (tests/test_cuda_nccl_world.c; the CUDA side is nccl_stub_cuda.c, see nccl_stub.h).
 *
 * What it fakes:
 * - ncclGetUniqueId: the id names a POSIX shared-memory segment.  ncclCommInitRankConfig
 *   (non-blocking communicators only: blocking = 0, the comm's) returns ncclInProgress at
 *   once; a thread opens the segment and joins, and ncclCommGetAsyncError says
 *   ncclInProgress until every rank has joined.
 * - A communicator's first collective call connects to the peers, as NCCL's lazy connection
 *   setup does: it returns ncclInProgress, and ncclCommGetAsyncError says so until every
 *   rank has made its first call.
 * - ncclAllReduce and ncclReduce (ncclSum), ncclBroadcast and ncclAllGather, in fp32, fp16
 *   and bf16, are queued on the caller's stream as host functions (cudaLaunchHostFunc) and
 *   run there, through the segment in chunks: each rank copies its part in, meets the
 *   others, computes its output from every rank's part, meets them again.  Sums are taken
 *   in fp32 in rank order and rounded once to the type.
 * - Failures as NCCL reports them: a rank that died (its lock on the segment is gone),
 *   aborted or left while the others wait for it is, on theirs, an ncclRemoteError from
 *   ncclCommGetAsyncError with ncclGetLastError naming the rank; their collective then
 *   stays stuck until ncclCommAbort, as a kernel would.  Collectives that differ between
 *   ranks hang, as in NCCL (the difference is in ncclGetLastError).
 * - The rules of a non-blocking communicator: a call made while it is still in progress
 *   is refused as NCCL 2.28 refuses it (ncclInvalidArgument), one after finalize or abort
 *   with ncclInvalidUsage, and both are counted; after an error a collective call returns
 *   that error.
 * - ncclCommFinalize (in progress until this rank's queued collectives have run),
 *   ncclCommDestroy, ncclCommAbort (ends a running collective and returns once it has left
 *   the buffers), ncclGetErrorString (NCCL 2.28's strings), ncclGetLastError.
 * - The faults a test injects (nccl_stub.h) and the calls it counts.
 *
 * What it does not: no GPU and no network; host memory stands in for device memory; none
 * of NCCL's algorithms (rings, trees, channels, protocols), so neither their bandwidth nor
 * their order of summation and rounding; one rank per process, at most STUB_MAX_RANKS; no
 * groups (ncclGroupStart/End), no reduce-scatter, no other reduction or type, no blocking
 * communicators: the comm uses none of them. */
#include "nccl_stub.h"

#include "common/half.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define STUB_MAX_RANKS 8
#define STUB_SLOT_BYTES (64 * 1024) /* per rank and chunk: a large collective takes several */
#define STUB_ID_MAGIC "ddpprof nccl stub"
#define STUB_NAME_AT 32              /* the segment's name, in the id after the magic */
#define STUB_PEER_CHECK_NS 2000000LL /* how often a waiting rank looks at the others */
#define STUB_ABORT_WAIT_NS 10000000000LL /* abort waits this long for a running collective */

enum stub_peer { PEER_ABSENT = 0, PEER_JOINED, PEER_LEFT, PEER_ABORTED };
enum stub_kind { STUB_ALLREDUCE, STUB_BROADCAST, STUB_REDUCE, STUB_ALLGATHER };
static const char *const stub_call_names[] = {"ncclAllReduce", "ncclBroadcast", "ncclReduce",
                                              "ncclAllGather"};
enum stub_fault_kind { FAULT_NONE, FAULT_DIE, FAULT_FAIL, FAULT_INIT_DIE, FAULT_INIT_HANG,
                       FAULT_FINALIZE_HANG };

/* What each rank says of the collective it is in, compared by all of them. */
struct stub_desc {
    uint64_t seq, count;
    int32_t kind, dtype, root, pad;
};

/* The segment every rank of one communicator maps. */
struct stub_shared {
    _Atomic int32_t world;                   /* set by the first rank to join */
    _Atomic int32_t joined;                  /* ranks that have joined */
    _Atomic int32_t state[STUB_MAX_RANKS];   /* enum stub_peer */
    _Atomic int32_t pid[STUB_MAX_RANKS];
    _Atomic int32_t connected[STUB_MAX_RANKS]; /* made its first collective call */
    _Atomic uint64_t arrive[STUB_MAX_RANKS]; /* meetings (barriers) entered */
    struct stub_desc desc[STUB_MAX_RANKS];
    unsigned char slot[STUB_MAX_RANKS][STUB_SLOT_BYTES];
};

struct ncclComm {
    pthread_mutex_t mu;
    pthread_cond_t cv; /* CLOCK_MONOTONIC; abort, destroy, the end of a collective */
    int rank, world;
    char name[NCCL_UNIQUE_ID_BYTES - STUB_NAME_AT];
    enum stub_fault_kind fault;
    int fault_n;
    int fd; /* the segment; its byte `rank` holds this rank's lock while it lives */
    struct stub_shared *sh;
    ncclResult_t async; /* what ncclCommGetAsyncError says */
    int connecting;     /* the first collective waits for every rank's first call */
    int finalizing;
    _Atomic int stop; /* aborted or destroyed: every collective ends at once */
    int refs;         /* the handle, the helper thread, each queued collective */
    int queued;       /* collectives queued and not yet run to their end */
    int running;      /* a collective is running on its stream */
    uint64_t calls, issued;
    uint64_t barriers; /* meetings this rank entered (the stream's thread only) */
    pthread_t helper;  /* init, then finalize */
    int has_helper;
};

struct stub_op {
    struct ncclComm *c;
    enum stub_kind kind;
    const void *send;
    void *recv;
    size_t count;
    ncclDataType_t dtype;
    int root;
    uint64_t seq;
    int die; /* the injected death happens in this one */
};

/* ------------------------------------------------------------------ process-wide state */

static pthread_mutex_t stub_mu = PTHREAD_MUTEX_INITIALIZER;
static struct nccl_stub_counts stub_counts;
static char stub_last_error[1024];
static char stub_misuse_msg[1024];
static _Thread_local char stub_last_copy[1024];
static _Thread_local char stub_misuse_copy[1024];

static void stub_set_last_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void stub_set_last_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    pthread_mutex_lock(&stub_mu);
    vsnprintf(stub_last_error, sizeof stub_last_error, fmt, ap);
    pthread_mutex_unlock(&stub_mu);
    va_end(ap);
}

/* A call NCCL refuses: counted, kept, and ncclInvalidUsage. */
static ncclResult_t stub_misuse(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static ncclResult_t stub_misuse(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    pthread_mutex_lock(&stub_mu);
    vsnprintf(stub_misuse_msg, sizeof stub_misuse_msg, fmt, ap);
    snprintf(stub_last_error, sizeof stub_last_error, "%s", stub_misuse_msg);
    stub_counts.misuses++;
    pthread_mutex_unlock(&stub_mu);
    va_end(ap);
    return ncclInvalidUsage;
}

static void stub_count(int *counter)
{
    pthread_mutex_lock(&stub_mu);
    ++*counter;
    pthread_mutex_unlock(&stub_mu);
}

void nccl_stub_counts_get(struct nccl_stub_counts *out)
{
    pthread_mutex_lock(&stub_mu);
    *out = stub_counts;
    pthread_mutex_unlock(&stub_mu);
}

const char *nccl_stub_last_misuse(void)
{
    pthread_mutex_lock(&stub_mu);
    snprintf(stub_misuse_copy, sizeof stub_misuse_copy, "%s", stub_misuse_msg);
    pthread_mutex_unlock(&stub_mu);
    return stub_misuse_copy;
}

const char *ncclGetLastError(ncclComm_t comm)
{
    (void)comm; /* NCCL's is per process too */
    pthread_mutex_lock(&stub_mu);
    snprintf(stub_last_copy, sizeof stub_last_copy, "%s", stub_last_error);
    pthread_mutex_unlock(&stub_mu);
    return stub_last_copy;
}

const char *ncclGetErrorString(ncclResult_t result)
{
    switch (result) { /* NCCL 2.28's, word for word (the test compares them where it can) */
    case ncclSuccess:
        return "no error";
    case ncclUnhandledCudaError:
        return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case ncclSystemError:
        return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case ncclInternalError:
        return "internal error - please report this issue to the NCCL developers";
    case ncclInvalidArgument:
        return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case ncclInvalidUsage:
        return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case ncclRemoteError:
        return "remote process exited or there was a network error";
    case ncclInProgress:
        return "NCCL operation in progress";
    default:
        return "unknown result code";
    }
}

static int64_t stub_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void stub_sleep_ns(long ns)
{
    struct timespec ts = {0, ns};
    nanosleep(&ts, NULL);
}

/* wait on c->cv (locked) for at most ns */
static void stub_timed_wait(struct ncclComm *c, int64_t ns)
{
    const int64_t until = stub_now_ns() + ns;
    struct timespec ts = {(time_t)(until / 1000000000LL), (long)(until % 1000000000LL)};
    pthread_cond_timedwait(&c->cv, &c->mu, &ts);
}

/* ------------------------------------------------------------------ the communicator */

static void stub_release(struct ncclComm *c)
{
    pthread_mutex_lock(&c->mu);
    const int left = --c->refs;
    pthread_mutex_unlock(&c->mu);
    if (left)
        return;
    if (c->sh)
        munmap(c->sh, sizeof *c->sh);
    if (c->fd >= 0)
        close(c->fd); /* lets go of this rank's lock */
    pthread_cond_destroy(&c->cv);
    pthread_mutex_destroy(&c->mu);
    free(c);
}

/* Rank j is alive while it holds its lock (an open file description's lock on byte j of
 * the segment goes when its process does). */
static int stub_alive(const struct ncclComm *c, int j)
{
    struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = j, .l_len = 1};
    if (fcntl(c->fd, F_OFD_GETLK, &fl) != 0)
        return 1; /* cannot tell: assume so */
    return fl.l_type != F_UNLCK;
}

/* 1 with why filled when rank j has joined and is gone (died, aborted, left), else 0 */
static int stub_peer_gone(const struct ncclComm *c, int j, char *why, size_t n)
{
    const int st = atomic_load(&c->sh->state[j]);
    const int pid = atomic_load(&c->sh->pid[j]);
    if (st == PEER_ABORTED)
        snprintf(why, n, "rank %d (pid %d) aborted its communicator", j, pid);
    else if (st == PEER_LEFT)
        snprintf(why, n, "rank %d (pid %d) finalized or destroyed its communicator", j, pid);
    else if (st == PEER_JOINED && !stub_alive(c, j))
        snprintf(why, n, "rank %d (pid %d) exited", j, pid);
    else
        return 0;
    return 1;
}

/* an ncclRemoteError for ncclCommGetAsyncError (the first error stays) */
static void stub_remote_error(struct ncclComm *c, const char *what, uint64_t seq,
                              const char *why)
{
    stub_set_last_error("%s #%llu on rank %d: %s", what, (unsigned long long)seq, c->rank, why);
    pthread_mutex_lock(&c->mu);
    if (c->async == ncclSuccess || c->async == ncclInProgress)
        c->async = ncclRemoteError;
    c->connecting = 0;
    pthread_mutex_unlock(&c->mu);
}

/* until ncclCommAbort or ncclCommDestroy (a kernel that cannot go on) */
static void stub_stall(struct ncclComm *c)
{
    pthread_mutex_lock(&c->mu);
    while (!atomic_load(&c->stop))
        stub_timed_wait(c, 100000000LL);
    pthread_mutex_unlock(&c->mu);
}

/* Has every rank made its first collective call?  (c->mu held, c->connecting) */
static void stub_connect_poll_locked(struct ncclComm *c)
{
    int pending = 0;
    for (int j = 0; j < c->world && c->async == ncclInProgress; j++) {
        char why[160];
        if (atomic_load(&c->sh->connected[j]))
            continue;
        pending = 1;
        if (stub_peer_gone(c, j, why, sizeof why)) {
            stub_set_last_error("connecting rank %d to its peers: %s", c->rank, why);
            c->async = ncclRemoteError;
        }
    }
    if (!pending && c->async == ncclInProgress)
        c->async = ncclSuccess;
    if (c->async != ncclInProgress)
        c->connecting = 0;
}

static enum stub_fault_kind stub_fault_parse(const char *s, int rank, int *n)
{
    static const struct {
        const char *name;
        enum stub_fault_kind kind;
    } kinds[] = {{"die", FAULT_DIE},
                 {"fail", FAULT_FAIL},
                 {"init-die", FAULT_INIT_DIE},
                 {"init-hang", FAULT_INIT_HANG},
                 {"finalize-hang", FAULT_FINALIZE_HANG}};
    if (!s || !*s)
        return FAULT_NONE;
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        size_t len = strlen(kinds[k].name);
        int r = -1, count = 0;
        if (strncmp(s, kinds[k].name, len) != 0 || s[len] != ':' ||
            sscanf(s + len + 1, "%d:%d", &r, &count) < 1)
            continue;
        if (r != rank)
            return FAULT_NONE;
        *n = count;
        return kinds[k].kind;
    }
    fprintf(stderr, "nccl stub: %s='%s' is not a fault (nccl_stub.h)\n", NCCL_STUB_FAULT_ENV, s);
    abort(); /* a typo in a test must not pass as "no fault" */
}

/* The init thread: join the segment, wait for every rank. */
static void *stub_init_thread(void *arg)
{
    struct ncclComm *c = arg;
    char why[200] = "";
    ncclResult_t fail = ncclSuccess;
    if (c->fault == FAULT_INIT_HANG) {
        stub_stall(c);
        goto out;
    }
    int fd = shm_open(c->name, O_RDWR | O_CREAT, 0600);
    if (fd < 0 || ftruncate(fd, sizeof(struct stub_shared)) != 0) {
        snprintf(why, sizeof why, "shm_open/ftruncate(%s): %s", c->name, strerror(errno));
        if (fd >= 0)
            close(fd);
        fail = ncclSystemError;
        goto out;
    }
    struct stub_shared *sh =
        mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (sh == MAP_FAILED) {
        snprintf(why, sizeof why, "mmap(%s): %s", c->name, strerror(errno));
        close(fd);
        fail = ncclSystemError;
        goto out;
    }
    pthread_mutex_lock(&c->mu);
    c->fd = fd;
    c->sh = sh;
    pthread_mutex_unlock(&c->mu);
    struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = c->rank, .l_len = 1};
    int32_t expect = 0, absent = PEER_ABSENT;
    if (fcntl(fd, F_OFD_SETLK, &fl) != 0 ||
        !atomic_compare_exchange_strong(&sh->state[c->rank], &absent, PEER_JOINED)) {
        snprintf(why, sizeof why, "rank %d is already in this communicator", c->rank);
        fail = ncclInvalidUsage;
        goto out;
    }
    if (!atomic_compare_exchange_strong(&sh->world, &expect, c->world) && expect != c->world) {
        snprintf(why, sizeof why, "rank %d was given %d ranks, another rank %d", c->rank,
                 c->world, expect);
        fail = ncclInvalidUsage;
        goto out;
    }
    atomic_store(&sh->pid[c->rank], (int32_t)getpid());
    if (c->fault == FAULT_INIT_DIE)
        raise(SIGKILL);
    atomic_fetch_add(&sh->joined, 1);
    for (int64_t next = 0; atomic_load(&sh->joined) < c->world;) {
        if (atomic_load(&c->stop))
            goto out;
        if (stub_now_ns() >= next) {
            for (int j = 0; j < c->world && !why[0]; j++)
                if (j != c->rank)
                    stub_peer_gone(c, j, why, sizeof why);
            if (why[0]) {
                fail = ncclRemoteError;
                goto out;
            }
            next = stub_now_ns() + STUB_PEER_CHECK_NS;
        }
        stub_sleep_ns(200000);
    }
    shm_unlink(c->name); /* everyone has it open: the name is no longer needed */
out:
    if (fail != ncclSuccess)
        stub_set_last_error("ncclCommInitRankConfig of rank %d of %d: %s", c->rank, c->world,
                            why);
    if (atomic_load(&c->stop) || fail != ncclSuccess)
        shm_unlink(c->name); /* nobody will join a failed communicator */
    pthread_mutex_lock(&c->mu);
    if (c->async == ncclInProgress)
        c->async = fail;
    pthread_mutex_unlock(&c->mu);
    stub_release(c);
    return NULL;
}

ncclResult_t ncclGetUniqueId(ncclUniqueId *uniqueId)
{
    static _Atomic unsigned serial;
    if (!uniqueId)
        return ncclInvalidArgument;
    memset(uniqueId, 0, sizeof *uniqueId);
    memcpy(uniqueId->internal, STUB_ID_MAGIC, sizeof STUB_ID_MAGIC);
    snprintf(uniqueId->internal + STUB_NAME_AT, NCCL_UNIQUE_ID_BYTES - STUB_NAME_AT,
             "/ddpprof-nccl-stub.%d.%u.%lld", (int)getpid(), atomic_fetch_add(&serial, 1),
             (long long)(stub_now_ns() % 1000000000LL));
    return ncclSuccess;
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank,
                                    ncclConfig_t *config)
{
    stub_count(&stub_counts.inits);
    if (!comm)
        return ncclInvalidArgument;
    *comm = NULL;
    if (!config || config->magic != 0xcafebeef || config->blocking != 0) {
        stub_set_last_error("nccl stub: only non-blocking communicators (a config from "
                            "NCCL_CONFIG_INITIALIZER with blocking = 0)");
        return ncclInvalidArgument;
    }
    if (memcmp(commId.internal, STUB_ID_MAGIC, sizeof STUB_ID_MAGIC) != 0 || nranks < 1 ||
        nranks > STUB_MAX_RANKS || rank < 0 || rank >= nranks) {
        stub_set_last_error("nccl stub: rank %d of %d ranks (at most %d), id %s", rank, nranks,
                            STUB_MAX_RANKS,
                            memcmp(commId.internal, STUB_ID_MAGIC, sizeof STUB_ID_MAGIC)
                                ? "not the stub's"
                                : "the stub's");
        return ncclInvalidArgument;
    }
    struct ncclComm *c = calloc(1, sizeof *c);
    if (!c)
        return ncclSystemError;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->cv, &ca);
    pthread_condattr_destroy(&ca);
    c->rank = rank;
    c->world = nranks;
    c->fd = -1;
    snprintf(c->name, sizeof c->name, "%s", commId.internal + STUB_NAME_AT);
    c->fault = stub_fault_parse(getenv(NCCL_STUB_FAULT_ENV), rank, &c->fault_n);
    c->async = ncclInProgress;
    c->refs = 2; /* the handle and the init thread */
    if (pthread_create(&c->helper, NULL, stub_init_thread, c) != 0) {
        c->refs = 1;
        stub_release(c);
        return ncclSystemError;
    }
    c->has_helper = 1;
    *comm = c;
    stub_count(&stub_counts.inits_in_progress);
    return ncclInProgress;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *asyncError)
{
    if (!comm || !asyncError)
        return ncclInvalidArgument;
    pthread_mutex_lock(&comm->mu);
    if (comm->connecting)
        stub_connect_poll_locked(comm);
    *asyncError = comm->async;
    pthread_mutex_unlock(&comm->mu);
    return ncclSuccess;
}

static void stub_join_helper(struct ncclComm *c)
{
    if (c->has_helper) {
        pthread_join(c->helper, NULL);
        c->has_helper = 0;
    }
}

/* The finalize thread: in progress until this rank's queued collectives have run. */
static void *stub_finalize_thread(void *arg)
{
    struct ncclComm *c = arg;
    pthread_mutex_lock(&c->mu);
    while (!atomic_load(&c->stop) && (c->queued > 0 || c->fault == FAULT_FINALIZE_HANG))
        stub_timed_wait(c, 100000000LL);
    if (!atomic_load(&c->stop) && c->async == ncclInProgress) {
        atomic_store(&c->sh->state[c->rank], PEER_LEFT);
        c->async = ncclSuccess;
    }
    pthread_mutex_unlock(&c->mu);
    stub_release(c);
    return NULL;
}

ncclResult_t ncclCommFinalize(ncclComm_t comm)
{
    stub_count(&stub_counts.finalizes);
    if (!comm)
        return ncclInvalidArgument;
    pthread_mutex_lock(&comm->mu);
    if (atomic_load(&comm->stop) || comm->finalizing || comm->async != ncclSuccess) {
        const ncclResult_t st = comm->async;
        pthread_mutex_unlock(&comm->mu);
        return stub_misuse("ncclCommFinalize on rank %d: the communicator is %s", comm->rank,
                           comm->finalizing ? "already finalizing"
                           : st == ncclInProgress ? "still in progress"
                                                  : "aborted or in error");
    }
    comm->finalizing = 1;
    comm->async = ncclInProgress;
    comm->refs++;
    pthread_mutex_unlock(&comm->mu);
    stub_join_helper(comm); /* the init thread, long done */
    if (pthread_create(&comm->helper, NULL, stub_finalize_thread, comm) != 0) {
        pthread_mutex_lock(&comm->mu);
        comm->async = ncclSystemError;
        comm->refs--;
        pthread_mutex_unlock(&comm->mu);
        return ncclSystemError;
    }
    comm->has_helper = 1;
    return ncclInProgress;
}

/* leave (state) and drop the handle; abort says how */
static void stub_close(struct ncclComm *c, int abort)
{
    pthread_mutex_lock(&c->mu);
    atomic_store(&c->stop, 1);
    pthread_cond_broadcast(&c->cv);
    if (c->sh) {
        int32_t joined = PEER_JOINED;
        if (abort)
            atomic_store(&c->sh->state[c->rank], PEER_ABORTED);
        else
            atomic_compare_exchange_strong(&c->sh->state[c->rank], &joined, PEER_LEFT);
    }
    /* a running collective ends at its next look at stop; then the buffers are the
     * caller's again */
    const int64_t give_up = stub_now_ns() + STUB_ABORT_WAIT_NS;
    while (c->running && stub_now_ns() < give_up)
        stub_timed_wait(c, 10000000LL);
    if (c->running)
        fprintf(stderr, "nccl stub: rank %d: a collective still runs after %s\n", c->rank,
                abort ? "ncclCommAbort" : "ncclCommDestroy");
    pthread_mutex_unlock(&c->mu);
    stub_join_helper(c);
    if (abort)
        shm_unlink(c->name); /* the init may not have got as far */
    stub_release(c);
}

ncclResult_t ncclCommDestroy(ncclComm_t comm)
{
    stub_count(&stub_counts.destroys);
    if (!comm)
        return ncclInvalidArgument;
    pthread_mutex_lock(&comm->mu);
    const int early = comm->async == ncclInProgress;
    pthread_mutex_unlock(&comm->mu);
    if (early) /* counted; destroyed anyway */
        stub_misuse("ncclCommDestroy on rank %d while the communicator is in progress",
                    comm->rank);
    stub_close(comm, 0);
    return ncclSuccess;
}

ncclResult_t ncclCommAbort(ncclComm_t comm)
{
    stub_count(&stub_counts.aborts);
    if (!comm)
        return ncclSuccess;
    stub_close(comm, 1);
    return ncclSuccess;
}

/* ------------------------------------------------------------------ collectives */

static size_t stub_type_size(ncclDataType_t t)
{
    return t == ncclFloat32 ? 4 : t == ncclFloat16 || t == ncclBfloat16 ? 2 : 0;
}

static float stub_load(const void *p, size_t i, ncclDataType_t t)
{
    if (t == ncclFloat32)
        return ((const float *)p)[i];
    const uint16_t h = ((const uint16_t *)p)[i];
    return t == ncclFloat16 ? half_f16_to_f32(h) : half_bf16_to_f32(h);
}

static void stub_store(void *p, size_t i, ncclDataType_t t, float v)
{
    if (t == ncclFloat32)
        ((float *)p)[i] = v;
    else
        ((uint16_t *)p)[i] = t == ncclFloat16 ? half_f32_to_f16(v) : half_f32_to_bf16(v);
}

/* Meet the other ranks (the n-th meeting of each).  0, or -1 when this rank was stopped or
 * a rank it waits for is gone (then after the remote error, stalled until stopped). */
static int stub_meet(struct ncclComm *c, const struct stub_op *op)
{
    struct stub_shared *sh = c->sh;
    const uint64_t target = ++c->barriers;
    atomic_store_explicit(&sh->arrive[c->rank], target, memory_order_release);
    int64_t next_check = stub_now_ns() + STUB_PEER_CHECK_NS;
    for (unsigned spins = 0;; spins++) {
        int waiting = 0;
        for (int j = 0; j < c->world && !waiting; j++)
            waiting = atomic_load_explicit(&sh->arrive[j], memory_order_acquire) < target;
        if (!waiting)
            return 0;
        if (atomic_load(&c->stop))
            return -1;
        if (stub_now_ns() >= next_check) {
            char why[160];
            for (int j = 0; j < c->world; j++)
                if (atomic_load(&sh->arrive[j]) < target &&
                    stub_peer_gone(c, j, why, sizeof why)) {
                    stub_remote_error(c, stub_call_names[op->kind], op->seq, why);
                    stub_stall(c);
                    return -1;
                }
            next_check = stub_now_ns() + STUB_PEER_CHECK_NS;
        }
        if (spins < 64)
            sched_yield();
        else
            stub_sleep_ns(spins < 512 ? 50000 : 500000);
    }
}

/* the first difference between this rank's collective and another's, or 0 */
static int stub_mismatch(const struct ncclComm *c, char *why, size_t n)
{
    const struct stub_desc *me = &c->sh->desc[c->rank];
    for (int j = 0; j < c->world; j++) {
        const struct stub_desc *d = &c->sh->desc[j];
        if (d->seq == me->seq && d->kind == me->kind && d->count == me->count &&
            d->dtype == me->dtype && d->root == me->root)
            continue;
        snprintf(why, n,
                 "rank %d is in %s #%llu (%llu elements, type %d, root %d), rank %d in %s "
                 "#%llu (%llu elements, type %d, root %d): collectives differ between ranks",
                 c->rank, stub_call_names[me->kind], (unsigned long long)me->seq,
                 (unsigned long long)me->count, me->dtype, me->root, j,
                 stub_call_names[d->kind], (unsigned long long)d->seq,
                 (unsigned long long)d->count, d->dtype, d->root);
        return 1;
    }
    return 0;
}

/* One collective, chunk by chunk through the segment (on the stream's thread). */
static void stub_run(struct ncclComm *c, const struct stub_op *op)
{
    struct stub_shared *sh = c->sh;
    const int rank = c->rank, world = c->world;
    const size_t es = stub_type_size(op->dtype), per_chunk = STUB_SLOT_BYTES / es;
    const size_t chunks = op->count ? (op->count + per_chunk - 1) / per_chunk : 1;
    sh->desc[rank] = (struct stub_desc){.seq = op->seq,
                                        .count = op->count,
                                        .kind = op->kind,
                                        .dtype = op->dtype,
                                        .root = op->root};
    for (size_t k = 0; k < chunks; k++) {
        const size_t off = k * per_chunk;
        const size_t n = op->count - off < per_chunk ? op->count - off : per_chunk;
        unsigned char *mine = sh->slot[rank];
        if (op->kind == STUB_ALLGATHER || op->kind == STUB_ALLREDUCE ||
            op->kind == STUB_REDUCE || (op->kind == STUB_BROADCAST && rank == op->root))
            memcpy(mine, (const unsigned char *)op->send + off * es, n * es);
        if (stub_meet(c, op))
            return;
        if (k == 0) {
            char why[400];
            if (stub_mismatch(c, why, sizeof why)) {
                stub_set_last_error("%s", why);
                stub_stall(c); /* NCCL would hang (or mix the data up) */
                return;
            }
            if (op->die)
                raise(SIGKILL); /* the others are inside this collective, waiting for us */
        }
        unsigned char *out = (unsigned char *)op->recv;
        switch (op->kind) {
        case STUB_ALLREDUCE:
        case STUB_REDUCE:
            if (op->kind == STUB_REDUCE && rank != op->root)
                break;
            for (size_t i = 0; i < n; i++) {
                float sum = stub_load(sh->slot[0], i, op->dtype);
                for (int j = 1; j < world; j++)
                    sum += stub_load(sh->slot[j], i, op->dtype);
                stub_store(out + off * es, i, op->dtype, sum);
            }
            break;
        case STUB_BROADCAST:
            if (rank != op->root || op->send != op->recv)
                memcpy(out + off * es, sh->slot[op->root], n * es);
            break;
        case STUB_ALLGATHER:
            for (int j = 0; j < world; j++)
                memcpy(out + ((size_t)j * op->count + off) * es, sh->slot[j], n * es);
            break;
        }
        if (stub_meet(c, op))
            return;
    }
}

/* The host function a collective is queued as. */
static void CUDART_CB stub_kernel(void *arg)
{
    struct stub_op *op = arg;
    struct ncclComm *c = op->c;
    pthread_mutex_lock(&c->mu);
    const int skip = atomic_load(&c->stop);
    const int broken = c->async != ncclSuccess && c->async != ncclInProgress;
    c->running = !skip;
    pthread_mutex_unlock(&c->mu);
    if (!skip && broken)
        stub_stall(c); /* behind a failed collective: stuck until abort, as on a GPU */
    else if (!skip)
        stub_run(c, op);
    pthread_mutex_lock(&c->mu);
    c->running = 0;
    c->queued--;
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
    free(op);
    stub_release(c);
}

static ncclResult_t stub_enqueue(struct ncclComm *c, enum stub_kind kind, const void *send,
                                 void *recv, size_t count, ncclDataType_t dt, ncclRedOp_t redop,
                                 int root, cudaStream_t stream)
{
    const char *call = stub_call_names[kind];
    if (!c)
        return ncclInvalidArgument;
    pthread_mutex_lock(&c->mu);
    if (c->connecting)
        stub_connect_poll_locked(c);
    const ncclResult_t st = c->async;
    const int stopped = atomic_load(&c->stop), finalizing = c->finalizing;
    pthread_mutex_unlock(&c->mu);
    if (stopped || finalizing)
        return stub_misuse("%s on rank %d: the communicator is %s", call, c->rank,
                           stopped ? "aborted or destroyed" : "finalizing");
    if (st == ncclInProgress) { /* NCCL 2.28 says so and returns ncclInvalidArgument */
        stub_misuse("%s on rank %d: Attempt to use communicator before the previous operation "
                    "returned ncclSuccess",
                    call, c->rank);
        return ncclInvalidArgument;
    }
    if (st != ncclSuccess) /* an error a collective already met: NCCL returns it */
        return st;
    const size_t es = stub_type_size(dt);
    const int reduces = kind == STUB_ALLREDUCE || kind == STUB_REDUCE;
    const int rooted = kind == STUB_BROADCAST || kind == STUB_REDUCE;
    const int needs_send = kind != STUB_BROADCAST || root == c->rank;
    const int needs_recv = kind != STUB_REDUCE || root == c->rank;
    if (!es || (reduces && redop != ncclSum) || (rooted && (root < 0 || root >= c->world)) ||
        (count && ((needs_send && !send) || (needs_recv && !recv))) || !stream) {
        stub_set_last_error("%s on rank %d: type %d, op %d, root %d, %zu elements, send %p, "
                            "recv %p, stream %p: the stub has fp32/fp16/bf16, ncclSum, a root "
                            "among the ranks, buffers and a stream",
                            call, c->rank, (int)dt, (int)redop, root, count, send, recv,
                            (void *)stream);
        return ncclInvalidArgument;
    }
    struct stub_op *op = calloc(1, sizeof *op);
    if (!op)
        return ncclSystemError;
    pthread_mutex_lock(&c->mu);
    const uint64_t nth = ++c->calls;
    if (c->fault == FAULT_FAIL && (uint64_t)c->fault_n == nth) {
        pthread_mutex_unlock(&c->mu);
        free(op);
        stub_set_last_error("%s call %llu on rank %d: injected failure (%s)", call,
                            (unsigned long long)nth, c->rank, NCCL_STUB_FAULT_ENV);
        return ncclSystemError;
    }
    *op = (struct stub_op){.c = c, .kind = kind, .send = send, .recv = recv, .count = count,
                           .dtype = dt, .root = rooted ? root : -1, .seq = ++c->issued,
                           .die = c->fault == FAULT_DIE && (uint64_t)c->fault_n == nth};
    const int first = op->seq == 1;
    c->refs++;
    c->queued++;
    pthread_mutex_unlock(&c->mu);
    if (cudaLaunchHostFunc(stream, stub_kernel, op) != cudaSuccess) {
        pthread_mutex_lock(&c->mu);
        c->refs--;
        c->queued--;
        c->issued--;
        pthread_mutex_unlock(&c->mu);
        free(op);
        stub_set_last_error("%s on rank %d: cudaLaunchHostFunc failed", call, c->rank);
        return ncclUnhandledCudaError;
    }
    if (!first)
        return ncclSuccess;
    /* the first collective connects to the peers: in progress until each has called too */
    atomic_store(&c->sh->connected[c->rank], 1);
    pthread_mutex_lock(&c->mu);
    c->connecting = 1;
    c->async = ncclInProgress;
    pthread_mutex_unlock(&c->mu);
    stub_count(&stub_counts.calls_in_progress);
    return ncclInProgress;
}

ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count,
                           ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                           cudaStream_t stream)
{
    return stub_enqueue(comm, STUB_ALLREDUCE, sendbuff, recvbuff, count, datatype, op, -1,
                        stream);
}

ncclResult_t ncclBroadcast(const void *sendbuff, void *recvbuff, size_t count,
                           ncclDataType_t datatype, int root, ncclComm_t comm,
                           cudaStream_t stream)
{
    return stub_enqueue(comm, STUB_BROADCAST, sendbuff, recvbuff, count, datatype, ncclSum,
                        root, stream);
}

ncclResult_t ncclReduce(const void *sendbuff, void *recvbuff, size_t count,
                        ncclDataType_t datatype, ncclRedOp_t op, int root, ncclComm_t comm,
                        cudaStream_t stream)
{
    return stub_enqueue(comm, STUB_REDUCE, sendbuff, recvbuff, count, datatype, op, root,
                        stream);
}

ncclResult_t ncclAllGather(const void *sendbuff, void *recvbuff, size_t sendcount,
                           ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream)
{
    return stub_enqueue(comm, STUB_ALLGATHER, sendbuff, recvbuff, sendcount, datatype, ncclSum,
                        -1, stream);
}
