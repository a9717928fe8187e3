/* queue.c — the asynchronous collective engine (see queue.h).
 *
 * One mutex guards the FIFO (head, tail), the live list (handles issued and not waited
 * for), the sequence counter, `busy` (a collective is running, on the comm thread or on a
 * caller) and `failed`.  Whoever sets busy owns the transport until it clears it: the
 * mutex hands the transport's state (and `failure`) from one running thread to the next. */
#include "comm/queue.h"

#include "comm/flight.h"
#include "common/clock.h"
#include "common/error.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* comm_queue_wait spins this long, yielding the core, before it sleeps on done_cv.  A
 * waiting rank thread that sleeps lets its core idle: a VM's vCPU halts, and the next
 * forward ran slower (ConvNet, 2-vCPU EPYC, pinned CPU ranks over a 25 Mbit/s link: compute
 * 18-19 ms a step after 40 ms waits for the network, 16-17 after 1 ms ones).  Yielding, the
 * comm's own threads get the core at once whenever they can run; past this, a collective
 * is a long wait (a late peer, a timeout) and the thread sleeps.  CUDA's default
 * synchronisation spins the same way (cudaDeviceScheduleAuto). */
#define QUEUE_SPIN_NS (200LL * 1000000LL)

struct comm_work {
    struct comm_item it;
    struct comm_work *next;                  /* queue order */
    struct comm_work *live_prev, *live_next; /* issued, not yet waited */
    int done, status;
    int64_t start_ns, end_ns; /* when it ran (CLOCK_MONOTONIC) */
    char msg[1024];           /* the error message when status is -1 */
};

struct comm_queue {
    const char *name;
    int rank, world;
    const struct comm_queue_ops *ops;
    void *ctx;
    struct flight *flight; /* the last collectives, dumped at the first failure (NULL: none) */
    char failure[1024];    /* the first error (the running thread's, see busy) */

    pthread_t thread;
    int thread_started;
    pthread_mutex_t mu;
    pthread_cond_t work_cv, done_cv;
    struct comm_work *head, *tail, *live;
    uint64_t issued; /* seq of the last collective issued */
    int busy;        /* a collective is running (comm thread or a caller) */
    int stopping, failed;
    _Atomic int cancel; /* stop: the running collective gives up at once */
};

const char *comm_op_name(int op)
{
    switch (op) {
    case COMM_OP_BROADCAST:
        return "broadcast";
    case COMM_OP_ALLREDUCE:
        return "all-reduce";
    case COMM_OP_REDUCE:
        return "reduce";
    case COMM_OP_ALLGATHER:
        return "all-gather";
    case COMM_OP_BARRIER:
        return "barrier";
    }
    return "?";
}

const char *comm_dtype_name(int dt)
{
    switch (dt) {
    case COMM_F32:
        return "f32";
    case COMM_F16:
        return "f16";
    case COMM_BF16:
        return "bf16";
    }
    return "?";
}

struct comm_queue *comm_queue_create(const char *name, int rank, int world,
                                     const struct comm_queue_ops *ops, void *ctx)
{
    struct comm_queue *q = calloc(1, sizeof *q);
    if (!q) {
        error_set("comm %s: rank %d: out of memory", name, rank);
        return NULL;
    }
    q->name = name;
    q->rank = rank;
    q->world = world;
    q->ops = ops;
    q->ctx = ctx;
    q->flight = flight_create(rank); /* out of memory: the comm works without one */
    pthread_mutex_init(&q->mu, NULL);
    pthread_cond_init(&q->work_cv, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC); /* stop's bounded wait */
    pthread_cond_init(&q->done_cv, &ca);
    pthread_condattr_destroy(&ca);
    return q;
}

int comm_queue_cancelled(const struct comm_queue *q)
{
    return atomic_load(&((struct comm_queue *)q)->cancel);
}

/* Run w on the calling thread, which owns the transport (it set busy, under mu, and read
 * `failed` then).  0, or -1 + error_set on this thread. */
static int queue_execute(struct comm_queue *q, struct comm_work *w, int failed)
{
    if (failed)
        return error_set("comm %s: rank %d in %s #%llu (count %zu): not run, the "
                         "communicator failed earlier (destroy it): %s", q->name, q->rank,
                         comm_op_name(w->it.op), (unsigned long long)w->it.seq, w->it.count,
                         q->failure);
    w->start_ns = clock_now_ns();
    flight_set_state(q->flight, w->it.seq, FLIGHT_STARTED);
    int rc = q->ops->run(q->ctx, &w->it);
    w->end_ns = clock_now_ns();
    flight_set_state(q->flight, w->it.seq, rc < 0 ? FLIGHT_FAILED : FLIGHT_DONE);
    if (rc < 0) {
        snprintf(q->failure, sizeof q->failure, "%s", error_get());
        if (!atomic_load(&q->cancel)) {
            if (q->ops->failed)
                q->ops->failed(q->ctx, q->failure);
            flight_dump(q->flight); /* where this rank was, beside its trace */
        }
        error_set("%s", q->failure); /* the hooks may have set their own */
    }
    return rc;
}

/* Under mu, after queue_execute: w is done (its waiters wake), the transport is free. */
static void queue_complete_locked(struct comm_queue *q, struct comm_work *w, int rc)
{
    if (rc < 0) {
        q->failed = 1;
        snprintf(w->msg, sizeof w->msg, "%s", error_get());
    }
    w->status = rc;
    w->done = 1;
    q->busy = 0;
    pthread_cond_broadcast(&q->done_cv);
    if (q->head) /* queued while a caller ran a collective itself */
        pthread_cond_signal(&q->work_cv);
}

/* Under mu: take the queue's head to run on this thread. */
static struct comm_work *queue_take_locked(struct comm_queue *q)
{
    struct comm_work *w = q->head;
    q->head = w->next;
    if (!q->head)
        q->tail = NULL;
    q->busy = 1;
    return w;
}

/* Under mu, with w taken (busy set): run w on this thread, mu released meanwhile, and
 * complete it; returns its status (on -1 the message is this thread's too). */
static int queue_run_taken_locked(struct comm_queue *q, struct comm_work *w)
{
    int failed = q->failed;
    pthread_mutex_unlock(&q->mu);
    int rc = queue_execute(q, w, failed);
    pthread_mutex_lock(&q->mu);
    queue_complete_locked(q, w, rc);
    return rc;
}

static void *queue_thread_main(void *arg)
{
    struct comm_queue *q = arg;
    pthread_mutex_lock(&q->mu);
    for (;;) {
        while ((!q->head || q->busy) && !q->stopping)
            pthread_cond_wait(&q->work_cv, &q->mu);
        if (q->stopping)
            break; /* queued work is dropped: stop frees it */
        queue_run_taken_locked(q, queue_take_locked(q));
    }
    pthread_mutex_unlock(&q->mu);
    return NULL;
}

int comm_queue_start(struct comm_queue *q)
{
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int err = pthread_create(&q->thread, NULL, queue_thread_main, q);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (err)
        return error_set("comm %s: rank %d cannot start its comm thread: %s", q->name, q->rank,
                         strerror(err));
    q->thread_started = 1;
    return 0;
}

/* The arguments of one collective: 0, or -1 + error_set. */
static int queue_check_args(const struct comm_queue *q, enum comm_op op, const void *buf,
                            const void *send, size_t count, enum comm_dtype dt, int root)
{
    size_t es = comm_dtype_size(dt);
    if (!es)
        return error_set("comm %s: rank %d: %s with dtype %d: not a comm_dtype (COMM_F32, "
                         "COMM_F16, COMM_BF16)", q->name, q->rank, comm_op_name(op), (int)dt);
    if ((op == COMM_OP_BROADCAST || op == COMM_OP_REDUCE) && (root < 0 || root >= q->world))
        return error_set("comm %s: rank %d: %s with root %d: the root must be a rank in 0..%d",
                         q->name, q->rank, comm_op_name(op), root, q->world - 1);
    size_t total = op == COMM_OP_ALLGATHER ? (size_t)q->world : 1;
    if (count > SIZE_MAX / es / total)
        return error_set("comm %s: rank %d: %s of %zu elements overflows size_t", q->name,
                         q->rank, comm_op_name(op), count);
    if (count && (!buf || (op == COMM_OP_ALLGATHER && !send)))
        return error_set("comm %s: rank %d: %s of %zu elements with a NULL buffer", q->name,
                         q->rank, comm_op_name(op), count);
    return 0;
}

/* Under mu: the next seq, recorded (bytes: this rank's payload; all-gather: what it
 * receives). */
static uint64_t queue_next_seq_locked(struct comm_queue *q, enum comm_op op, size_t count,
                                      enum comm_dtype dt)
{
    uint64_t bytes = (uint64_t)count * comm_dtype_size(dt);
    if (op == COMM_OP_ALLGATHER)
        bytes *= (uint64_t)q->world;
    uint64_t seq = ++q->issued;
    flight_queued(q->flight, seq, comm_op_name(op), -1, bytes);
    return seq;
}

/* Queue one collective whose arguments were checked; the handle, or NULL + error_set. */
static struct comm_work *queue_enqueue(struct comm_queue *q, enum comm_op op, void *buf,
                                       const void *send, size_t count, enum comm_dtype dt,
                                       int root)
{
    struct comm_work *w = calloc(1, sizeof *w);
    if (!w) {
        error_set("comm %s: rank %d: out of memory queueing a %s", q->name, q->rank,
                  comm_op_name(op));
        return NULL;
    }
    w->it = (struct comm_item){.op = op, .buf = buf, .send = send, .count = count, .dt = dt,
                               .root = root};
    pthread_mutex_lock(&q->mu);
    w->it.seq = queue_next_seq_locked(q, op, count, dt);
    if (q->tail)
        q->tail->next = w;
    else
        q->head = w;
    q->tail = w;
    w->live_next = q->live;
    if (q->live)
        q->live->live_prev = w;
    q->live = w;
    pthread_cond_signal(&q->work_cv);
    pthread_mutex_unlock(&q->mu);
    return w;
}

struct comm_work *comm_queue_issue(struct comm_queue *q, enum comm_op op, void *buf,
                                   const void *send, size_t count, enum comm_dtype dt,
                                   int root)
{
    if (queue_check_args(q, op, buf, send, count, dt, root) < 0)
        return NULL;
    return queue_enqueue(q, op, buf, send, count, dt, root);
}

int comm_queue_wait(struct comm_queue *q, struct comm_work *w, struct comm_span *span)
{
    if (!w)
        return error_set("comm %s: rank %d: wait on a NULL handle (did allreduce_async fail?)",
                         q->name, q->rank);
    pthread_mutex_lock(&q->mu);
    if (!w->done && q->head == w && !q->busy) /* not taken yet: run it here, no hand-off */
        queue_run_taken_locked(q, queue_take_locked(q));
    const int64_t spin_end = clock_now_ns() + QUEUE_SPIN_NS;
    while (!w->done && clock_now_ns() < spin_end) {
        pthread_mutex_unlock(&q->mu);
        sched_yield();
        pthread_mutex_lock(&q->mu);
    }
    while (!w->done) /* bounded: the transport's run is */
        pthread_cond_wait(&q->done_cv, &q->mu);
    if (w->live_prev)
        w->live_prev->live_next = w->live_next;
    else
        q->live = w->live_next;
    if (w->live_next)
        w->live_next->live_prev = w->live_prev;
    pthread_mutex_unlock(&q->mu);
    int rc = w->status;
    if (rc < 0)
        error_set("%s", w->msg);
    if (span) {
        span->start_ns = w->start_ns;
        span->end_ns = w->end_ns;
    }
    free(w);
    return rc;
}

int comm_queue_call(struct comm_queue *q, enum comm_op op, void *buf, const void *send,
                    size_t count, enum comm_dtype dt, int root)
{
    if (queue_check_args(q, op, buf, send, count, dt, root) < 0)
        return -1;
    pthread_mutex_lock(&q->mu);
    if (!q->ops->call_inline || q->head || q->busy) {
        pthread_mutex_unlock(&q->mu);
        struct comm_work *w = queue_enqueue(q, op, buf, send, count, dt, root);
        return w ? comm_queue_wait(q, w, NULL) : -1;
    }
    struct comm_work w = {.it = {.op = op, .buf = buf, .send = send, .count = count, .dt = dt,
                                 .root = root}};
    w.it.seq = queue_next_seq_locked(q, op, count, dt);
    q->busy = 1;
    int rc = queue_run_taken_locked(q, &w);
    pthread_mutex_unlock(&q->mu);
    return rc;
}

int comm_queue_stop(struct comm_queue *q, int abandon_ms)
{
    if (!q)
        return 0;
    pthread_mutex_lock(&q->mu);
    q->stopping = 1;
    atomic_store(&q->cancel, 1);
    pthread_cond_signal(&q->work_cv);
    int running = q->busy;
    pthread_mutex_unlock(&q->mu);
    if (q->ops->interrupt)
        q->ops->interrupt(q->ctx, running);
    if (q->thread_started && abandon_ms > 0) {
        struct timespec until;
        clock_gettime(CLOCK_MONOTONIC, &until);
        int64_t ns = until.tv_nsec + (int64_t)abandon_ms * 1000000LL;
        until.tv_sec += (time_t)(ns / 1000000000LL);
        until.tv_nsec = (long)(ns % 1000000000LL);
        pthread_mutex_lock(&q->mu);
        int err = 0;
        while (q->busy && err != ETIMEDOUT)
            err = pthread_cond_timedwait(&q->done_cv, &q->mu, &until);
        running = q->busy;
        pthread_mutex_unlock(&q->mu);
        if (running) { /* it cannot be cancelled: left to the process's exit */
            pthread_detach(q->thread);
            return -1;
        }
    }
    if (q->thread_started)
        pthread_join(q->thread, NULL);
    while (q->live) { /* handles nobody waited for */
        struct comm_work *w = q->live;
        q->live = w->live_next;
        free(w);
    }
    pthread_cond_destroy(&q->done_cv);
    pthread_cond_destroy(&q->work_cv);
    pthread_mutex_destroy(&q->mu);
    flight_free(q->flight);
    free(q);
    return 0;
}
