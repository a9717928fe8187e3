/* comm_shm.c — the shm transport of struct comm (see comm_shm.h).
 *
 * Segment layout (one mapping shared by all ranks):
 *
 *   struct shm_header            magic (published last by rank 0), geometry, attach count
 *                                and gate, the abort flag and the first failing rank's message
 *   struct shm_rank[world]       one 128-byte-aligned record per rank: its barrier counter
 *                                (a futex word), pid and pid namespace (to see it die), its
 *                                state (attached / left) and the collective it is entering
 *   data: slot[2][world]         chunk_bytes (= max_bytes/2) per slot, two parities
 *
 * Synchronisation is a counter barrier: a rank arriving at its n-th barrier stores n in its
 * counter (release) and waits until every other counter reaches n (acquire): spin briefly,
 * then sleep on the peer's counter with a futex, waking every few ms to look for an abort, a
 * peer that left or died, and the timeout.  Counters never differ by more than one, so a
 * 32-bit wrap-safe comparison suffices.
 *
 * Every collective writes its descriptor (seq, op, count, dtype, root) before its first
 * barrier and checks everyone's after it, so ranks issuing different collectives fail at
 * once.  Chunks alternate between the two slot parities, which makes one barrier per chunk
 * enough for broadcast, reduce and all-gather and two for all-reduce (reduce-scatter into
 * rank 0's slot, then everyone copies the result out): a slot of parity p is rewritten only
 * after a barrier that every reader of its previous contents has passed.
 *
 * The comm thread, the FIFO, the sequence numbers, the first-error latch and the flight
 * record are the shared engine's (comm/queue.h): this file runs one collective when the
 * queue says (shm_run).  The barrier counter, the chunk parity and the descriptors belong
 * to whichever thread runs the current collective (the comm thread, or a caller running a
 * blocking collective itself, which on small collectives such as SyncBatchNorm's statistics
 * saves a hand-off that cost more than the exchange); the queue runs one at a time and
 * its mutex hands them from one to the next. */
#include "comm/comm_shm.h"
#include "comm/queue.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/error.h"
#include "common/half.h"

#define SHM_MAGIC 0x3130736d68737064ull /* "dpshms01" */
#define SHM_VERSION 1u
#define SHM_MAX_WORLD 4096
#define SHM_MIN_BYTES 256
#define SHM_ALIGN 64            /* slot and share alignment, bytes */
#define SHM_SPIN 256            /* polls for a peer before sleeping on a futex, at least */
#define SHM_SPIN_NS 200000L     /* and for up to 200 us when every rank can have a CPU */
#define SHM_SLICE_NS 20000000L  /* longest futex sleep between checks: 20 ms */
#define SHM_LIVENESS_NS 100000000LL /* how often a waited-for peer's pid is checked: 100 ms */
#define SHM_ACC_BLOCK 1024      /* fp32 accumulator block of the reductions, elements */

#if defined(__x86_64__) || defined(__i386__)
#define shm_cpu_relax() __builtin_ia32_pause()
#elif defined(__aarch64__)
#define shm_cpu_relax() __asm__ __volatile__("yield" ::: "memory")
#else
#define shm_cpu_relax() ((void)0)
#endif

_Static_assert(ATOMIC_INT_LOCK_FREE == 2 && ATOMIC_LLONG_LOCK_FREE == 2,
               "shm comm needs address-free lock-free atomics in shared memory");

enum shm_state { SHM_ABSENT = 0, SHM_ATTACHED = 1, SHM_LEFT = 2 };

/* The collective a rank is entering; written by its owner before the first barrier. */
struct shm_desc {
    uint64_t seq, count;
    int32_t op, dtype, root, pad;
};

struct shm_rank {
    _Alignas(128) _Atomic uint32_t arrive; /* barriers reached (futex word) */
    _Atomic uint32_t sleepers;             /* peers asleep on arrive */
    _Atomic uint32_t state;                /* enum shm_state */
    int32_t pid;
    uint64_t start_time;          /* /proc/pid/stat starttime: guards against pid reuse */
    uint64_t pidns_dev, pidns_ino; /* pid checks only between ranks of one pid namespace */
    struct shm_desc desc[2];       /* by the parity of seq */
};

struct shm_header {
    _Atomic uint64_t magic; /* SHM_MAGIC once rank 0 has initialised everything */
    uint32_t version, world;
    uint64_t max_bytes, chunk_bytes, data_offset, total_bytes;
    _Atomic uint32_t attached;  /* ranks attached */
    _Atomic uint32_t gate;      /* 1 once all attached and the name is gone (futex word) */
    _Atomic int32_t abort_claim; /* -1, or the first rank that failed (claims abort_msg) */
    _Atomic int32_t abort_rank;  /* -1, or that rank once abort_msg is written */
    char abort_msg[512];         /* its error message, for the peers' messages */
    struct shm_rank ranks[];    /* world entries */
};

struct shm_comm {
    struct comm base; /* first: struct comm * converts to struct shm_comm * */
    char name[NAME_MAX + 1];
    int timeout_ms;
    int64_t spin_ns; /* SHM_SPIN_NS, or 0 where the ranks' threads outnumber the CPUs (a
                      * peer may wait for this one's CPU: polling would only delay it) */
    struct shm_header *hdr;
    size_t map_bytes;
    unsigned char *data;
    size_t chunk_bytes;
    uint64_t pidns_dev, pidns_ino;

    /* the thread running the current collective only (the queue's busy owner) */
    uint32_t epoch;         /* barriers passed */
    uint64_t chunks;        /* chunks moved; its parity picks the slot set */
    int check_pending;      /* next barrier is the collective's first: compare descriptors */

    struct comm_queue *q;   /* thread, FIFO, sequence numbers, first error, flight record */
};

static void shm_futex_wake(_Atomic uint32_t *word)
{
    syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

/* Sleep while *word == val, at most ns (spurious and early wake-ups are fine). */
static void shm_futex_wait(_Atomic uint32_t *word, uint32_t val, int64_t ns)
{
    struct timespec ts = {(time_t)(ns / 1000000000LL), (long)(ns % 1000000000LL)};
    syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT, val, &ts, NULL, 0);
}

/* /proc/<pid>/stat: the state letter and starttime (field 22).  0 when read, 1 when the
 * process does not exist, -1 when unknown (no /proc, unreadable). */
static int shm_proc_stat(int pid, char *state, uint64_t *start_time)
{
    char path[64], text[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT || errno == ESRCH ? 1 : -1;
    ssize_t n = read(fd, text, sizeof text - 1);
    close(fd);
    if (n <= 0)
        return -1;
    text[n] = '\0';
    char *p = strrchr(text, ')'); /* the command name may hold spaces and parentheses */
    if (!p || p[1] != ' ' || !p[2])
        return -1;
    *state = p[2];
    p += 3;
    for (int field = 4; field < 22; field++) { /* skip ppid .. itrealvalue */
        p = strchr(p, ' ');
        if (!p)
            return -1;
        p++;
    }
    *start_time = strtoull(p, NULL, 10);
    return 0;
}

/* 1 when rank k's process is known to be gone (exited, killed, zombie, pid reused). */
static int shm_peer_dead(const struct shm_comm *c, int k)
{
    const struct shm_rank *r = &c->hdr->ranks[k];
    if (!c->pidns_ino || r->pidns_ino != c->pidns_ino || r->pidns_dev != c->pidns_dev ||
        r->pid <= 0)
        return 0; /* another pid namespace (or no /proc): only the timeout can tell */
    char state;
    uint64_t start_time;
    int rc = shm_proc_stat(r->pid, &state, &start_time);
    if (rc != 0)
        return rc == 1;
    return state == 'Z' || state == 'X' || (r->start_time && start_time != r->start_time);
}

/* "comm shm: rank R in all-reduce #S (count N)" */
static void shm_where(const struct shm_comm *c, const struct comm_item *w, char *out, size_t cap)
{
    snprintf(out, cap, "comm shm: rank %d in %s #%llu (count %zu)", c->base.rank,
             comm_op_name(w->op), (unsigned long long)w->seq, w->count);
}

/* Give up on the communicator: later calls fail, and the peers are told not to wait. */
static void shm_abort_segment(struct shm_comm *c, const char *why)
{
    struct shm_header *h = c->hdr;
    int32_t none = -1;
    if (atomic_compare_exchange_strong(&h->abort_claim, &none, c->base.rank)) {
        snprintf(h->abort_msg, sizeof h->abort_msg, "%s", why);
        atomic_store(&h->abort_rank, c->base.rank);
    }
    for (uint32_t k = 0; k < h->world; k++) /* the header's world: validated, or the creator's */
        shm_futex_wake(&h->ranks[k].arrive);
    shm_futex_wake(&h->gate);
}

static int shm_fail_dead(const struct shm_comm *c, const struct comm_item *w, int k)
{
    char where[256];
    shm_where(c, w, where, sizeof where);
    return error_set("%s: rank %d (pid %d) died (did it crash or get killed?)", where, k,
                     (int)c->hdr->ranks[k].pid);
}

static int shm_fail_aborted(const struct shm_comm *c, const struct comm_item *w, int aborted)
{
    char where[256];
    shm_where(c, w, where, sizeof where);
    return error_set("%s: rank %d gave up on the communicator first: %s", where, aborted,
                     c->hdr->abort_msg);
}

static int shm_arrived(const struct shm_comm *c, int k, uint32_t target)
{
    return (int32_t)(atomic_load(&c->hdr->ranks[k].arrive) - target) >= 0;
}

static int shm_fail_timeout(const struct shm_comm *c, const struct comm_item *w, uint32_t target)
{
    char missing[256] = "";
    size_t len = 0;
    int n = 0;
    for (int k = 0; k < c->base.world; k++) {
        if (k == c->base.rank || shm_arrived(c, k, target))
            continue;
        if (len < sizeof missing - 16)
            len += (size_t)snprintf(missing + len, sizeof missing - len, "%s%d", n ? ", " : "", k);
        n++;
    }
    return error_set("comm shm: rank %d timed out after %.1f s in %s #%llu (count %zu): "
                     "rank%s %s did not arrive (did a rank skip a collective or die?)",
                     c->base.rank, c->timeout_ms / 1000.0, comm_op_name(w->op),
                     (unsigned long long)w->seq, w->count, n == 1 ? "" : "s", missing);
}

/* Compare every rank's descriptor of this collective with ours. */
static int shm_check_descs(const struct shm_comm *c, const struct comm_item *w)
{
    int par = (int)(w->seq & 1);
    const struct shm_desc *me = &c->hdr->ranks[c->base.rank].desc[par];
    for (int k = 0; k < c->base.world; k++) {
        const struct shm_desc *d = &c->hdr->ranks[k].desc[par];
        if (d->seq == me->seq && d->op == me->op && d->count == me->count &&
            d->dtype == me->dtype && d->root == me->root)
            continue;
        return error_set("comm shm: rank %d in %s #%llu (count %zu, %s, root %d) but rank %d is "
                         "in %s #%llu (count %llu, %s, root %d): all ranks must issue the same "
                         "collectives in the same order", c->base.rank, comm_op_name(w->op),
                         (unsigned long long)w->seq, w->count, comm_dtype_name(me->dtype),
                         me->root, k, comm_op_name(d->op), (unsigned long long)d->seq,
                         (unsigned long long)d->count, comm_dtype_name(d->dtype), d->root);
    }
    return 0;
}

/* Wait (bounded) until rank k has reached barrier `target`. */
static int shm_wait_peer(struct shm_comm *c, const struct comm_item *w, int k, uint32_t target,
                         int64_t *deadline)
{
    struct shm_rank *r = &c->hdr->ranks[k];
    /* ranks run the same steps, so the peer is usually microseconds away: poll for up to
     * spin_ns before sleeping.  On a 2-vCPU KVM guest a futex sleep's wake-up often took
     * 100+ us, and DDP's per-step overhead fell with longer polling, 0.05 -> 0.2 -> 1 ms,
     * by about as much as the noise (results/cpu-speed-notes.md).  The checks below
     * (abort, death, timeout) come after at most that. */
    int64_t now = 0, spin_end = 0;
    for (int i = 1;; i++) {
        if (shm_arrived(c, k, target))
            return 0;
        shm_cpu_relax();
        if (i % SHM_SPIN == 0) {
            now = clock_now_ns();
            if (!spin_end)
                spin_end = now + c->spin_ns;
            if (now >= spin_end)
                break;
        }
    }
    if (!*deadline)
        *deadline = now + (int64_t)c->timeout_ms * 1000000LL;
    int64_t next_liveness = now;
    char where[256];
    for (;;) {
        uint32_t seen = atomic_load(&r->arrive);
        if ((int32_t)(seen - target) >= 0)
            return 0;
        if (comm_queue_cancelled(c->q)) {
            shm_where(c, w, where, sizeof where);
            return error_set("%s: the communicator was destroyed while the collective ran",
                             where);
        }
        int32_t aborted = atomic_load(&c->hdr->abort_rank);
        if (aborted >= 0 && aborted != c->base.rank) {
            if (shm_peer_dead(c, k) && !shm_arrived(c, k, target)) /* the root cause, if so */
                return shm_fail_dead(c, w, k);
            return shm_fail_aborted(c, w, aborted);
        }
        if (atomic_load(&r->state) == SHM_LEFT && !shm_arrived(c, k, target)) {
            shm_where(c, w, where, sizeof where);
            return error_set("%s: rank %d destroyed its communicator before finishing this "
                             "collective (did it skip a collective or stop early?)", where, k);
        }
        if (now >= next_liveness) {
            if (shm_peer_dead(c, k) && !shm_arrived(c, k, target))
                return shm_fail_dead(c, w, k);
            next_liveness = now + SHM_LIVENESS_NS;
        }
        if (now >= *deadline)
            return shm_fail_timeout(c, w, target);
        int64_t nap = *deadline - now;
        if (nap > SHM_SLICE_NS)
            nap = SHM_SLICE_NS;
        atomic_fetch_add(&r->sleepers, 1);
        if (atomic_load(&r->arrive) == seen)
            shm_futex_wait(&r->arrive, seen, nap);
        atomic_fetch_sub(&r->sleepers, 1);
        now = clock_now_ns();
    }
}

/* One barrier among all ranks; the collective's first also checks the descriptors. */
static int shm_barrier_wait(struct shm_comm *c, const struct comm_item *w)
{
    struct shm_rank *me = &c->hdr->ranks[c->base.rank];
    uint32_t target = ++c->epoch;
    atomic_store(&me->arrive, target);
    if (atomic_load(&me->sleepers))
        shm_futex_wake(&me->arrive);
    int64_t deadline = 0; /* set on the first sleep: the timeout counts from there */
    for (int k = 0; k < c->base.world; k++)
        if (k != c->base.rank && shm_wait_peer(c, w, k, target, &deadline) < 0)
            return -1;
    if (c->check_pending) { /* first: a mismatch is the more useful message */
        c->check_pending = 0;
        if (shm_check_descs(c, w) < 0)
            return -1;
    }
    int32_t aborted = atomic_load(&c->hdr->abort_rank);
    if (aborted >= 0 && aborted != c->base.rank)
        return shm_fail_aborted(c, w, aborted);
    return 0;
}

static unsigned char *shm_slot(const struct shm_comm *c, uint64_t parity, int k)
{
    return c->data + ((size_t)(parity & 1) * (size_t)c->base.world + (size_t)k) * c->chunk_bytes;
}

/* out[i] = sum over ranks 0..world-1, in that order, of slot k's element i, for i in [lo, hi);
 * fp16/bf16 are summed in fp32 and rounded once.  out may be rank 0's slot itself. */
static void shm_reduce_range(const struct shm_comm *c, uint64_t parity, enum comm_dtype dt,
                             size_t lo, size_t hi, void *out)
{
    float acc[SHM_ACC_BLOCK];
    int world = c->base.world;
    for (size_t b = lo; b < hi; b += SHM_ACC_BLOCK) {
        size_t n = hi - b < SHM_ACC_BLOCK ? hi - b : SHM_ACC_BLOCK;
        if (dt == COMM_F32) {
            const float *s0 = (const float *)shm_slot(c, parity, 0) + b;
            for (size_t i = 0; i < n; i++)
                acc[i] = s0[i];
            for (int k = 1; k < world; k++) {
                const float *s = (const float *)shm_slot(c, parity, k) + b;
                for (size_t i = 0; i < n; i++)
                    acc[i] += s[i];
            }
            memcpy((float *)out + b, acc, n * sizeof(float));
        } else {
            int half = dt == COMM_F16;
            const uint16_t *s0 = (const uint16_t *)shm_slot(c, parity, 0) + b;
            for (size_t i = 0; i < n; i++)
                acc[i] = half ? half_f16_to_f32(s0[i]) : half_bf16_to_f32(s0[i]);
            for (int k = 1; k < world; k++) {
                const uint16_t *s = (const uint16_t *)shm_slot(c, parity, k) + b;
                if (half)
                    for (size_t i = 0; i < n; i++)
                        acc[i] += half_f16_to_f32(s[i]);
                else
                    for (size_t i = 0; i < n; i++)
                        acc[i] += half_bf16_to_f32(s[i]);
            }
            uint16_t *o = (uint16_t *)out + b;
            for (size_t i = 0; i < n; i++)
                o[i] = half ? half_f32_to_f16(acc[i]) : half_f32_to_bf16(acc[i]);
        }
    }
}

/* Execute one collective (comm thread). */
static int shm_run(struct shm_comm *c, const struct comm_item *w)
{
    int world = c->base.world, me = c->base.rank;
    size_t es = comm_dtype_size(w->dt);
    size_t per_chunk = c->chunk_bytes / es;
    size_t nchunks = w->count ? (w->count + per_chunk - 1) / per_chunk : 1;
    unsigned char *buf = w->buf;

    if (world == 1) { /* nothing to exchange; a sum of one term is that term */
        if (w->op == COMM_OP_ALLGATHER && w->count && w->buf != w->send)
            memmove(w->buf, w->send, w->count * es);
        return 0;
    }

    struct shm_desc *d = &c->hdr->ranks[me].desc[w->seq & 1];
    d->seq = w->seq;
    d->count = w->count;
    d->op = (int32_t)w->op;
    d->dtype = (int32_t)w->dt;
    d->root = w->root;
    c->check_pending = 1;

    if (w->op == COMM_OP_BARRIER)
        return shm_barrier_wait(c, w);

    for (size_t ci = 0; ci < nchunks; ci++) {
        size_t off = ci * per_chunk;
        size_t n = w->count - off < per_chunk ? w->count - off : per_chunk;
        size_t bytes = n * es;
        uint64_t p = c->chunks++;
        switch (w->op) {
        case COMM_OP_BROADCAST:
            if (me == w->root && bytes)
                memcpy(shm_slot(c, p, me), buf + off * es, bytes);
            if (shm_barrier_wait(c, w) < 0)
                return -1;
            if (me != w->root && bytes)
                memcpy(buf + off * es, shm_slot(c, p, w->root), bytes);
            break;
        case COMM_OP_REDUCE:
            if (bytes)
                memcpy(shm_slot(c, p, me), buf + off * es, bytes);
            if (shm_barrier_wait(c, w) < 0)
                return -1;
            if (me == w->root)
                shm_reduce_range(c, p, w->dt, 0, n, buf + off * es);
            break;
        case COMM_OP_ALLGATHER: {
            const unsigned char *send = w->send;
            if (bytes)
                memcpy(shm_slot(c, p, me), send + off * es, bytes);
            if (shm_barrier_wait(c, w) < 0)
                return -1;
            for (int k = 0; k < world && bytes; k++)
                memcpy(buf + ((size_t)k * w->count + off) * es, shm_slot(c, p, k), bytes);
            break;
        }
        case COMM_OP_ALLREDUCE: {
            if (bytes)
                memcpy(shm_slot(c, p, me), buf + off * es, bytes);
            if (shm_barrier_wait(c, w) < 0)
                return -1;
            /* reduce-scatter: this rank sums its share into rank 0's slot */
            size_t align = SHM_ALIGN / es;
            size_t share = ((n + (size_t)world - 1) / (size_t)world + align - 1) / align * align;
            size_t lo = (size_t)me * share < n ? (size_t)me * share : n;
            size_t hi = n - lo < share ? n : lo + share;
            shm_reduce_range(c, p, w->dt, lo, hi, shm_slot(c, p, 0));
            if (shm_barrier_wait(c, w) < 0)
                return -1;
            if (bytes)
                memcpy(buf + off * es, shm_slot(c, p, 0), bytes);
            break;
        }
        case COMM_OP_BARRIER:
            break;
        }
    }
    return 0;
}

/* The queue's hooks: run a collective; the first failure tells the peers; destroy makes
 * the peers waiting for this rank fail now instead of at their timeout. */
static int shm_run_item(void *ctx, const struct comm_item *it)
{
    return shm_run(ctx, it);
}

static void shm_failed(void *ctx, const char *msg)
{
    shm_abort_segment(ctx, msg);
}

static void shm_interrupt(void *ctx, int running)
{
    (void)running; /* the running collective sees comm_queue_cancelled at its next check */
    struct shm_comm *c = ctx;
    if (!c->hdr)
        return;
    atomic_store(&c->hdr->ranks[c->base.rank].state, SHM_LEFT);
    for (int k = 0; k < c->base.world; k++)
        shm_futex_wake(&c->hdr->ranks[k].arrive);
    shm_futex_wake(&c->hdr->gate);
}

static const struct comm_queue_ops shm_queue_ops = {shm_run_item, shm_failed, shm_interrupt,
                                                   1};

static struct comm_queue *shm_q(struct comm *base) { return ((struct shm_comm *)base)->q; }

static int shm_broadcast(struct comm *base, void *buf, size_t count, enum comm_dtype dt, int root)
{
    return comm_queue_call(shm_q(base), COMM_OP_BROADCAST, buf, NULL, count, dt, root);
}

static struct comm_work *shm_allreduce_async(struct comm *base, void *buf, size_t count,
                                             enum comm_dtype dt)
{
    return comm_queue_issue(shm_q(base), COMM_OP_ALLREDUCE, buf, NULL, count, dt, -1);
}

static int shm_wait(struct comm *base, struct comm_work *w, struct comm_span *span)
{
    return comm_queue_wait(shm_q(base), w, span);
}

static int shm_allreduce(struct comm *base, void *buf, size_t count, enum comm_dtype dt)
{
    return comm_queue_call(shm_q(base), COMM_OP_ALLREDUCE, buf, NULL, count, dt, -1);
}

static int shm_reduce(struct comm *base, void *buf, size_t count, enum comm_dtype dt, int root)
{
    return comm_queue_call(shm_q(base), COMM_OP_REDUCE, buf, NULL, count, dt, root);
}

static int shm_allgather(struct comm *base, const void *send, void *recv, size_t count,
                         enum comm_dtype dt)
{
    return comm_queue_call(shm_q(base), COMM_OP_ALLGATHER, recv, send, count, dt, -1);
}

static int shm_barrier(struct comm *base)
{
    return comm_queue_call(shm_q(base), COMM_OP_BARRIER, NULL, NULL, 0, COMM_F32, -1);
}

static void *shm_stream(struct comm *base) { return (void)base, NULL; }

static void shm_destroy(struct comm *base)
{
    struct shm_comm *c = (struct shm_comm *)base;
    if (!c)
        return;
    if (c->q)
        comm_queue_stop(c->q, 0); /* interrupts the running collective, then joins */
    else
        shm_interrupt(c, 0);
    if (c->hdr)
        munmap(c->hdr, c->map_bytes);
    free(c);
}

/* Fill this rank's record (pid, pid namespace, start time) and claim the rank. */
static int shm_register(struct shm_comm *c)
{
    struct shm_rank *r = &c->hdr->ranks[c->base.rank];
    uint32_t absent = SHM_ABSENT;
    if (!atomic_compare_exchange_strong(&r->state, &absent, SHM_ATTACHED))
        return error_set("comm shm: rank %d: another process (pid %d) already joined shm "
                         "segment %s as rank %d (two ranks with the same RANK?)",
                         c->base.rank, (int)r->pid, c->name, c->base.rank);
    r->pid = (int32_t)getpid();
    char state;
    uint64_t start_time;
    r->start_time = shm_proc_stat(getpid(), &state, &start_time) == 0 ? start_time : 0;
    r->pidns_dev = c->pidns_dev;
    r->pidns_ino = c->pidns_ino;
    return 0;
}

static size_t shm_header_bytes(int world)
{
    size_t bytes = sizeof(struct shm_header) + (size_t)world * sizeof(struct shm_rank);
    return (bytes + 4095) / 4096 * 4096;
}

/* The attach window: from rank 0's shm_open(O_CREAT) to the gate's unlink the segment has a
 * name in /dev/shm that only this code removes.  A SIGINT, SIGTERM, SIGHUP or SIGQUIT
 * landing there (the launcher stopping a failed job) removes the name first, then takes
 * its old action again and is raised anew, so no signal leaves a segment behind.  (SIGKILL
 * cannot be caught: then the other ranks' deadline removes it.)  One window per process:
 * where ranks are threads of one process (tests), the first comm to open it owns it, and
 * only its owner closes it (shm_window_lock orders them; the handler reads only
 * shm_window_open, a sig_atomic_t set before and cleared after the path is valid). */
static const int shm_window_signals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};
#define SHM_WINDOW_SIGNALS (int)(sizeof shm_window_signals / sizeof shm_window_signals[0])
static pthread_mutex_t shm_window_lock = PTHREAD_MUTEX_INITIALIZER;
static struct sigaction shm_window_old[SHM_WINDOW_SIGNALS];
static char shm_window_path[300]; /* "/dev/shm/NAME" while the window is open */
static volatile sig_atomic_t shm_window_open;

static void shm_window_on_signal(int sig)
{
    if (shm_window_open)
        unlink(shm_window_path); /* async-signal-safe, as shm_unlink is not said to be */
    for (int i = 0; i < SHM_WINDOW_SIGNALS; i++)
        if (shm_window_signals[i] == sig)
            sigaction(sig, &shm_window_old[i], NULL);
    raise(sig); /* delivered with the old action once this handler returns */
}

/* 1 when this call opened the window (pass it to shm_window_end), 0 when another comm of
 * this process holds it */
static int shm_window_begin(const char *name)
{
    pthread_mutex_lock(&shm_window_lock);
    const int opened = !shm_window_open;
    if (opened) {
        snprintf(shm_window_path, sizeof shm_window_path, "/dev/shm%s", name);
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = shm_window_on_signal;
        sigfillset(&sa.sa_mask);
        shm_window_open = 1;
        for (int i = 0; i < SHM_WINDOW_SIGNALS; i++)
            sigaction(shm_window_signals[i], &sa, &shm_window_old[i]);
    }
    pthread_mutex_unlock(&shm_window_lock);
    return opened;
}

static void shm_window_end(int opened)
{
    if (!opened)
        return;
    pthread_mutex_lock(&shm_window_lock);
    for (int i = 0; i < SHM_WINDOW_SIGNALS; i++)
        sigaction(shm_window_signals[i], &shm_window_old[i], NULL);
    shm_window_open = 0;
    pthread_mutex_unlock(&shm_window_lock);
}

/* All ranks are in: remove the name (nothing can leak from now on), then let everyone go. */
static void shm_open_gate(struct shm_comm *c)
{
    shm_unlink(c->name);
    atomic_store(&c->hdr->gate, 1);
    shm_futex_wake(&c->hdr->gate);
}

/* Rank 0: create, size, reserve and initialise the segment, then publish it. */
static int shm_segment_create(struct shm_comm *c, size_t max_bytes)
{
    int world = c->base.world;
    size_t data_offset = shm_header_bytes(world);
    if (c->chunk_bytes > (SIZE_MAX - data_offset) / 2 / (size_t)world)
        return error_set("comm shm: rank 0: max_bytes %zu times world %d overflows", max_bytes,
                         world);
    size_t total = data_offset + 2 * (size_t)world * c->chunk_bytes;
    int fd = shm_open(c->name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) {
        if (errno == EEXIST)
            return error_set("comm shm: rank 0 cannot create shm segment %s: it already exists "
                             "(another run using the same name, or a leftover: remove "
                             "/dev/shm%s)", c->name, c->name);
        return error_set("comm shm: rank 0 cannot create shm segment %s: %s", c->name,
                         strerror(errno));
    }
    int rc = ftruncate(fd, (off_t)total) < 0 ? errno : posix_fallocate(fd, 0, (off_t)total);
    if (rc) {
        close(fd);
        shm_unlink(c->name);
        return error_set("comm shm: rank 0 cannot reserve %.1f MiB for shm segment %s: %s "
                         "(lower max_bytes, or enlarge /dev/shm, e.g. docker --shm-size)",
                         total / 1048576.0, c->name, strerror(rc));
    }
    void *map = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    int map_errno = errno;
    close(fd);
    if (map == MAP_FAILED) {
        shm_unlink(c->name);
        return error_set("comm shm: rank 0 cannot map shm segment %s (%zu bytes): %s", c->name,
                         total, strerror(map_errno));
    }
    c->hdr = map;
    c->map_bytes = total;
    c->data = (unsigned char *)map + data_offset;
    struct shm_header *h = c->hdr; /* fresh pages are zero: counters, states, descriptors */
    h->version = SHM_VERSION;
    h->world = (uint32_t)world;
    h->max_bytes = max_bytes;
    h->chunk_bytes = c->chunk_bytes;
    h->data_offset = data_offset;
    h->total_bytes = total;
    atomic_store(&h->abort_claim, -1);
    atomic_store(&h->abort_rank, -1);
    if (shm_register(c) < 0) { /* cannot happen on a fresh segment; keep the rule anyway */
        shm_unlink(c->name);
        munmap(c->hdr, c->map_bytes);
        c->hdr = NULL;
        return -1;
    }
    atomic_store(&h->attached, 1);
    atomic_store_explicit(&h->magic, SHM_MAGIC, memory_order_release);
    return 0;
}

/* Other ranks: wait until rank 0 has published the segment, map and check it, register. */
static int shm_segment_attach(struct shm_comm *c, size_t max_bytes, int64_t deadline)
{
    int nap_ms = 1; /* growing to 10 ms */
    for (;;) {
        int fd = shm_open(c->name, O_RDWR | O_CLOEXEC, 0600);
        if (fd >= 0) {
            struct stat st;
            if (fstat(fd, &st) == 0 && (size_t)st.st_size >= sizeof(struct shm_header)) {
                void *map = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED,
                                 fd, 0);
                if (map != MAP_FAILED) {
                    struct shm_header *h = map;
                    if (atomic_load_explicit(&h->magic, memory_order_acquire) == SHM_MAGIC) {
                        close(fd);
                        c->hdr = h;
                        c->map_bytes = (size_t)st.st_size;
                        break;
                    }
                    munmap(map, (size_t)st.st_size);
                }
            } /* else: size 0, rank 0 has not sized it yet */
            close(fd);
        } else if (errno != ENOENT) {
            return error_set("comm shm: rank %d cannot open shm segment %s: %s", c->base.rank,
                             c->name, strerror(errno));
        }
        int64_t now = clock_now_ns();
        if (now >= deadline)
            return error_set("comm shm: rank %d timed out after %.1f s waiting for rank 0 to "
                             "create shm segment %s (is rank 0 running, with the same segment "
                             "name?)", c->base.rank, c->timeout_ms / 1000.0, c->name);
        const int64_t left_ms = (deadline - now + 999999) / 1000000; /* >= 1 */
        clock_sleep_ms(nap_ms < left_ms ? nap_ms : (int)left_ms);
        if (nap_ms < 10)
            nap_ms++;
    }
    struct shm_header *h = c->hdr;
    if (h->version != SHM_VERSION || h->world != (uint32_t)c->base.world ||
        h->max_bytes != max_bytes || h->chunk_bytes != c->chunk_bytes ||
        h->total_bytes != c->map_bytes ||
        h->data_offset != shm_header_bytes(c->base.world)) {
        error_set("comm shm: rank %d: shm segment %s was created for world %u, max_bytes %llu "
                  "(version %u) but this rank has world %d, max_bytes %zu (version %u): all ranks "
                  "must agree", c->base.rank, c->name, h->world,
                  (unsigned long long)h->max_bytes, h->version, c->base.world, max_bytes,
                  SHM_VERSION);
        if (h->version == SHM_VERSION && shm_header_bytes((int)h->world) <= c->map_bytes)
            shm_abort_segment(c, error_get()); /* the run cannot work: fail the others now */
        shm_unlink(c->name);
        munmap(c->hdr, c->map_bytes);
        c->hdr = NULL;
        return -1;
    }
    c->data = (unsigned char *)h + h->data_offset;
    if (shm_register(c) < 0) {
        shm_abort_segment(c, error_get());
        shm_unlink(c->name);
        munmap(c->hdr, c->map_bytes);
        c->hdr = NULL;
        return -1;
    }
    if (atomic_fetch_add(&h->attached, 1) + 1 == (uint32_t)c->base.world)
        shm_open_gate(c); /* the last rank in */
    return 0;
}

/* The attach barrier: every rank waits until all `world` have registered and the name is
 * gone, so that no rank returns from create while the segment can still leak. */
static int shm_wait_attached(struct shm_comm *c, int64_t deadline)
{
    struct shm_header *h = c->hdr;
    for (;;) {
        int32_t aborted = atomic_load(&h->abort_rank); /* first: a late gate is no success */
        if (aborted >= 0 && aborted != c->base.rank)
            return error_set("comm shm: rank %d: rank %d gave up while attaching to shm segment "
                             "%s: %s", c->base.rank, aborted, c->name, h->abort_msg);
        if (atomic_load(&h->gate))
            return 0;
        int64_t now = clock_now_ns();
        if (now >= deadline) {
            char missing[256] = "";
            size_t len = 0;
            int count = 0;
            for (int k = 0; k < c->base.world; k++) {
                if (atomic_load(&h->ranks[k].state) != SHM_ABSENT)
                    continue;
                if (len < sizeof missing - 16)
                    len += (size_t)snprintf(missing + len, sizeof missing - len, "%s%d",
                                            count ? ", " : "", k);
                count++;
            }
            return error_set("comm shm: rank %d timed out after %.1f s waiting for rank%s %s to "
                             "attach to shm segment %s (were all ranks started, with the same "
                             "segment name and world size?)", c->base.rank,
                             c->timeout_ms / 1000.0, count == 1 ? "" : "s", missing, c->name);
        }
        int64_t nap = deadline - now < SHM_SLICE_NS ? deadline - now : SHM_SLICE_NS;
        shm_futex_wait(&h->gate, 0, nap);
    }
}

static const struct comm shm_comm_ops = {
    .name = "shm",
    .broadcast = shm_broadcast,
    .allreduce_async = shm_allreduce_async,
    .wait = shm_wait,
    .reduce = shm_reduce,
    .allgather = shm_allgather,
    .barrier = shm_barrier,
    .stream = shm_stream,
    .order = NULL, /* no stream: a collective runs on host memory the caller owns */
    .destroy = shm_destroy,
    .allreduce = shm_allreduce,
};

void comm_shm_set_polling(struct comm *base, int poll)
{
    ((struct shm_comm *)base)->spin_ns = poll ? SHM_SPIN_NS : 0;
}

struct comm *comm_shm_create(int rank, int world, const char *segment_name, size_t max_bytes,
                             int timeout_ms)
{
    if (world < 1 || world > SHM_MAX_WORLD || rank < 0 || rank >= world) {
        error_set("comm shm: rank %d of world %d: need 1 <= world <= %d and 0 <= rank < world",
                  rank, world, SHM_MAX_WORLD);
        return NULL;
    }
    if (timeout_ms <= 0) {
        error_set("comm shm: rank %d: timeout_ms %d must be > 0", rank, timeout_ms);
        return NULL;
    }
    if (max_bytes < SHM_MIN_BYTES) {
        error_set("comm shm: rank %d: max_bytes %zu is below the minimum %d", rank, max_bytes,
                  SHM_MIN_BYTES);
        return NULL;
    }
    const char *base_name = segment_name && segment_name[0] == '/' ? segment_name + 1
                                                                     : segment_name;
    if (!base_name || !*base_name || strchr(base_name, '/') || strlen(base_name) >= NAME_MAX) {
        error_set("comm shm: rank %d: segment name \"%s\" must be one path component of 1..%d "
                  "characters, e.g. /ddpprof-1234", rank, segment_name ? segment_name : "(null)",
                  NAME_MAX - 1);
        return NULL;
    }
    struct shm_comm *c = calloc(1, sizeof *c);
    if (!c) {
        error_set("comm shm: rank %d: out of memory", rank);
        return NULL;
    }
    c->base = shm_comm_ops;
    c->base.rank = rank;
    c->base.world = world;
    snprintf(c->name, sizeof c->name, "/%s", base_name);
    c->timeout_ms = timeout_ms;
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    comm_shm_set_polling(&c->base, cpus <= 0 || world <= cpus);
    c->chunk_bytes = max_bytes / 2 / SHM_ALIGN * SHM_ALIGN;
    c->q = comm_queue_create("shm", rank, world, &shm_queue_ops, c);
    if (!c->q) {
        free(c);
        return NULL;
    }
    struct stat ns;
    if (stat("/proc/self/ns/pid", &ns) == 0) {
        c->pidns_dev = (uint64_t)ns.st_dev;
        c->pidns_ino = (uint64_t)ns.st_ino;
    }

    int64_t deadline = clock_now_ns() + (int64_t)timeout_ms * 1000000LL;
    const int window = shm_window_begin(c->name);
    int rc = rank == 0 ? shm_segment_create(c, max_bytes)
                       : shm_segment_attach(c, max_bytes, deadline);
    if (rc == 0 && world == 1)
        shm_open_gate(c); /* nobody else will attach */
    if (rc == 0 && shm_wait_attached(c, deadline) < 0) {
        shm_abort_segment(c, error_get());
        shm_unlink(c->name); /* not everyone came: nobody else may remove the name */
        rc = -1;
    }
    shm_window_end(window); /* the name is gone now, whichever way it went */
    if (rc == 0 && comm_queue_start(c->q) < 0) {
        shm_abort_segment(c, error_get());
        rc = -1;
    }
    if (rc < 0) {
        shm_destroy(&c->base);
        return NULL;
    }
    return &c->base;
}
