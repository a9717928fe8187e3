/* comm_gloo.cc — the gloo transport of struct comm (see comm_gloo.h); the only C++ in the
 * trainer: a thin shim that turns Gloo's C++ API (exceptions, shared_ptr contexts, options
 * objects) into the C ops table.  No exception leaves this file: each one becomes an
 * error_set status.
 *
 * Layout: struct gloo_holder (plain C: struct comm first, then a pointer) is what the C side
 * sees; class GlooComm owns the Gloo context and the TCP device.  The comm thread, its
 * FIFO, the sequence numbers, the first-error latch and the flight record are the shared
 * engine's (comm/queue.h): GlooComm::run executes one collective, with Gloo's own timeout,
 * when the queue says. */
#include "comm/comm_gloo.h"

#include "comm/queue.h"
#include "comm/store.h"
#include "common/clock.h"
#include "common/error.h"
#include "common/half.h"

#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/math.h>
#include <gloo/reduce.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/tcp/device.h>

#include <arpa/inet.h>
#include <dirent.h>
#include <netdb.h>
#include <sched.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace {

/* destroy: how long a running collective gets to end once the connections are closed */
constexpr int GLOO_ABANDON_MS = 200;

/* Gloo's messages start with "[/path/file.cc:123] ": keep what follows. */
std::string gloo_trim(const char *what)
{
    std::string s(what ? what : "");
    if (!s.empty() && s[0] == '[') {
        size_t end = s.find("] ");
        if (end != std::string::npos)
            s = s.substr(end + 2);
    }
    return s;
}

/* Gloo's rendezvous Store over ddpprof's store: every key under prefix.  Store errors
 * (timeouts naming the key, a lost rank 0) become gloo::IoException with that message. */
class StoreAdapter : public gloo::rendezvous::Store {
  public:
    StoreAdapter(struct store *s, std::string prefix) : s_(s), prefix_(std::move(prefix)) {}

    void set(const std::string &key, const std::vector<char> &data) override
    {
        if (store_set(s_, (prefix_ + key).c_str(), data.data(), data.size()))
            throw gloo::IoException(error_get());
    }

    std::vector<char> get(const std::string &key) override
    {
        std::vector<char> buf(64 * 1024);
        size_t len = 0;
        std::string k = prefix_ + key;
        if (store_get(s_, k.c_str(), buf.data(), buf.size(), &len)) {
            if (len <= buf.size())
                throw gloo::IoException(error_get());
            buf.resize(len); /* larger than our first guess: read it again whole */
            if (store_get(s_, k.c_str(), buf.data(), buf.size(), &len))
                throw gloo::IoException(error_get());
        }
        buf.resize(len);
        return buf;
    }

    void wait(const std::vector<std::string> &keys) override
    {
        for (const std::string &key : keys)
            if (store_wait(s_, (prefix_ + key).c_str()))
                throw gloo::IoException(error_get());
    }

    /* the store's own timeout (the comm's) bounds every wait */
    void wait(const std::vector<std::string> &keys, const std::chrono::milliseconds &) override
    {
        wait(keys);
    }

  private:
    struct store *s_;
    std::string prefix_;
};

class GlooComm {
  public:
    GlooComm(int rank, int world, int timeout_ms)
        : rank_(rank), world_(world), timeout_ms_(timeout_ms)
    {
    }

    /* 0 or -1 (error_set); starts the queue's comm thread */
    int connect(struct store *s, const std::string &prefix, const char *peer_addr);
    /* Stop the queue and release everything; false when a running collective had to be
     * abandoned (then nothing may be freed: the comm thread still uses this object). */
    bool stop();

    comm_queue *q_ = nullptr;

    /* the queue's hooks (see comm_queue_ops) */
    int run_item(const comm_item *w);
    void failed();
    void interrupt(bool running);

  private:
    void run(const comm_item *w);
    template <typename Options, typename Fn>
    void guarded(const std::shared_ptr<Options> &o, uint32_t tag, std::chrono::milliseconds ms,
                 Fn fn);
    std::string describe(const comm_item *w) const;
    std::string peers_of(const std::string &msg) const;

    const int rank_, world_, timeout_ms_;
    std::vector<std::shared_ptr<void>> kept_; /* failed collectives' options: see guarded */
    std::shared_ptr<gloo::transport::Device> dev_;
    std::shared_ptr<gloo::rendezvous::Context> ctx_;
    std::vector<std::string> addrs_; /* each rank's listening address */
    std::vector<float> wide_;        /* fp32 scratch of half-precision sums (running thread) */
};

int gloo_run_item(void *ctx, const comm_item *it)
{
    return static_cast<GlooComm *>(ctx)->run_item(it);
}

void gloo_failed(void *ctx, const char *msg)
{
    (void)msg;
    static_cast<GlooComm *>(ctx)->failed();
}

void gloo_interrupt(void *ctx, int running) { static_cast<GlooComm *>(ctx)->interrupt(running); }

const comm_queue_ops gloo_queue_ops = {gloo_run_item, gloo_failed, gloo_interrupt, 0};

/* The address of this host's interface that routes to peer (a UDP connect sends nothing),
 * as text into out; 0, or -1 when peer cannot be resolved or routed. */
int gloo_local_addr(const char *peer, std::string &out)
{
    struct addrinfo hints = {};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_DGRAM;
    struct addrinfo *ais = nullptr;
    if (getaddrinfo(peer, "9", &hints, &ais) != 0)
        return -1;
    int rc = -1;
    for (struct addrinfo *ai = ais; ai && rc < 0; ai = ai->ai_next) {
        int fd = socket(ai->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
            continue;
        struct sockaddr_storage self;
        socklen_t len = sizeof self;
        char text[INET6_ADDRSTRLEN] = "";
        if (::connect(fd, ai->ai_addr, ai->ai_addrlen) == 0 &&
            getsockname(fd, reinterpret_cast<struct sockaddr *>(&self), &len) == 0) {
            const void *a = self.ss_family == AF_INET
                                ? static_cast<const void *>(
                                      &reinterpret_cast<struct sockaddr_in *>(&self)->sin_addr)
                                : static_cast<const void *>(
                                      &reinterpret_cast<struct sockaddr_in6 *>(&self)->sin6_addr);
            if (inet_ntop(self.ss_family, a, text, sizeof text)) {
                out = text;
                rc = 0;
            }
        }
        close(fd);
    }
    freeaddrinfo(ais);
    return rc;
}

/* The ids of this process's threads (/proc/self/task). */
std::set<long> gloo_tids()
{
    std::set<long> t;
    DIR *d = opendir("/proc/self/task");
    if (!d)
        return t;
    while (struct dirent *e = readdir(d))
        if (e->d_name[0] != '.')
            t.insert(strtol(e->d_name, nullptr, 10));
    closedir(d);
    return t;
}

/* Gloo's TCP device reads every socket on one event-loop thread (tcp::Loop), started by
 * CreateDevice: the threads that were not there before.  Its Pair::handleEvents only
 * try-locks the pair, and returns when the collective's thread holds the lock (posting a
 * send or a receive, writev included); epoll, level-triggered, hands it the same event at
 * once, so the loop spins until the holder lets go.  Woken by a packet, a SCHED_NORMAL loop
 * thread preempts the holder; where the two share a core (a CPU rank pinned to one) the
 * holder runs again only at the next scheduler tick (4 ms at HZ=250) while the loop spins:
 * near-empty all-reduces took 3.3-4.0 ms, and a step with 7 buckets 36-44 ms instead of
 * 18-25 (results/shaped_grid_20261201).  A SCHED_BATCH thread never preempts on wakeup
 * (the kernel's check_preempt_wakeup_fair), so the holder finishes first; with a core of
 * its own the loop runs at once all the same.  Best effort: a thread that cannot be
 * changed keeps its policy, and the comm works as before.  The thread is named
 * "gloo-loop" for top, perf and Nsight Systems. */
void gloo_loop_batch(const std::set<long> &before)
{
    for (long t : gloo_tids()) {
        if (before.count(t))
            continue;
        struct sched_param sp = {};
        (void)sched_setscheduler((pid_t)t, SCHED_BATCH, &sp);
        char path[64];
        snprintf(path, sizeof path, "/proc/self/task/%ld/comm", t);
        if (FILE *f = fopen(path, "w")) {
            fputs("gloo-loop", f);
            fclose(f);
        }
    }
}

int GlooComm::connect(struct store *s, const std::string &prefix, const char *peer_addr)
{
    gloo::transport::tcp::attr attr;
    const char *ifname = getenv("GLOO_SOCKET_IFNAME");
    std::string where;
    if (ifname && *ifname) {
        attr.iface = ifname;
        where = std::string("interface ") + ifname + " (GLOO_SOCKET_IFNAME)";
    } else if (peer_addr && *peer_addr) {
        std::string local;
        if (gloo_local_addr(peer_addr, local))
            return error_set("comm gloo: rank %d: no route from this host to '%s' (MASTER_ADDR): "
                             "cannot pick the interface to listen on (set GLOO_SOCKET_IFNAME)",
                             rank_, peer_addr);
        attr.hostname = local;
        where = local + " (the interface that reaches " + peer_addr + ")";
    } else {
        char host[256] = "";
        gethostname(host, sizeof host - 1);
        attr.hostname = host;
        where = std::string("host name ") + host;
    }
    /* Gloo's threads (the device's event loop) and ours take no signals: they stay with
     * the caller's threads.  Gloo writes with writev, which cannot say MSG_NOSIGNAL: a
     * peer that died must be an error, not SIGPIPE (Python, under PyTorch, ignores it too). */
    signal(SIGPIPE, SIG_IGN);
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = 0;
    try {
        /* a thread made and joined first: a runtime that starts a thread of its own at a
         * process's first pthread_create (ThreadSanitizer's background thread) does it
         * now, not inside CreateDevice, where it would pass for Gloo's loop */
        std::thread([] {}).join();
        const std::set<long> before = gloo_tids();
        dev_ = gloo::transport::tcp::CreateDevice(attr);
        gloo_loop_batch(before);
        ctx_ = std::make_shared<gloo::rendezvous::Context>(rank_, world_);
        ctx_->setTimeout(std::chrono::milliseconds(timeout_ms_));
        StoreAdapter store(s, prefix);
        /* each rank's address, to name the ranks of a peer address in error messages */
        std::string self = attr.hostname.empty() ? attr.iface : attr.hostname;
        store.set("addr/" + std::to_string(rank_), std::vector<char>(self.begin(), self.end()));
        ctx_->connectFullMesh(store, dev_);
        addrs_.resize((size_t)world_);
        for (int k = 0; k < world_; k++) {
            std::vector<char> a = store.get("addr/" + std::to_string(k));
            addrs_[(size_t)k].assign(a.begin(), a.end());
        }
    } catch (const std::exception &e) {
        rc = error_set("comm gloo: rank %d of %d: connecting on %s failed: %s", rank_, world_,
                       where.c_str(), gloo_trim(e.what()).c_str());
    }
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
    if (rc == 0 && !(q_ = comm_queue_create("gloo", rank_, world_, &gloo_queue_ops, this)))
        rc = -1;
    if (rc == 0 && comm_queue_start(q_) < 0)
        rc = -1;
    return rc;
}

/* "; the peer is one of ranks 2, 3 (host 10.0.0.2)" for the address Gloo's message names
 * (the ranks other than this one listening there), or "" */
std::string GlooComm::peers_of(const std::string &msg) const
{
    for (const std::string &a : addrs_) {
        if (a.empty() || msg.find("[" + a + "]") == std::string::npos)
            continue;
        std::string ranks;
        int n = 0;
        for (int k = 0; k < world_; k++)
            if (addrs_[(size_t)k] == a && k != rank_)
                ranks += (n++ ? ", " : "") + std::to_string(k);
        if (n)
            return std::string("; the peer is ") + (n > 1 ? "one of ranks " : "rank ") + ranks +
                   " (host " + a + ")";
    }
    return "";
}

std::string GlooComm::describe(const comm_item *w) const
{
    char text[256];
    if (w->op == COMM_OP_BARRIER)
        snprintf(text, sizeof text, "barrier #%llu", (unsigned long long)w->seq);
    else if (w->op == COMM_OP_BROADCAST || w->op == COMM_OP_REDUCE)
        snprintf(text, sizeof text, "%s #%llu (%zu %s, root %d)", comm_op_name(w->op),
                 (unsigned long long)w->seq, w->count, comm_dtype_name(w->dt), w->root);
    else
        snprintf(text, sizeof text, "%s #%llu (%zu %s)", comm_op_name(w->op),
                 (unsigned long long)w->seq, w->count, comm_dtype_name(w->dt));
    return text;
}

/* Widen n half-precision values at src into wide (fp32), or narrow them back. */
void gloo_widen(comm_dtype dt, const void *src, float *wide, size_t n)
{
    const uint16_t *h = static_cast<const uint16_t *>(src);
    for (size_t i = 0; i < n; i++)
        wide[i] = dt == COMM_F16 ? half_f16_to_f32(h[i]) : half_bf16_to_f32(h[i]);
}

void gloo_narrow(comm_dtype dt, const float *wide, void *dst, size_t n)
{
    uint16_t *h = static_cast<uint16_t *>(dst);
    for (size_t i = 0; i < n; i++)
        h[i] = dt == COMM_F16 ? half_f32_to_f16(wide[i]) : half_f32_to_bf16(wide[i]);
}

void gloo_sum_f32(void *c, const void *a, const void *b, size_t n)
{
    gloo::sum<float>(c, a, b, n);
}

/* Run collective fn on its options o, with tag and timeout ms.  When it throws (a timeout, a closed connection),
 * Gloo's transport thread may still complete a send or receive on o's buffers:
 * ThreadSanitizer caught UnboundBuffer::handleSendCompletion signalling a buffer that the
 * unwinding had just destroyed.  So a failed collective's options are kept until stop()
 * has released the device and its thread. */
template <typename Options, typename Fn>
void GlooComm::guarded(const std::shared_ptr<Options> &o, uint32_t tag,
                       std::chrono::milliseconds ms, Fn fn)
{
    o->setTag(tag);
    o->setTimeout(ms);
    try {
        fn(*o);
    } catch (...) {
        kept_.push_back(o);
        throw;
    }
}

void GlooComm::run(const comm_item *w)
{
    const size_t n = w->count, esize = comm_dtype_size(w->dt);
    const uint32_t tag = (uint32_t)w->seq;
    auto ms = std::chrono::milliseconds(timeout_ms_);
    switch (w->op) {
    case COMM_OP_BARRIER: {
        auto o = std::make_shared<gloo::BarrierOptions>(ctx_);
        guarded(o, tag, ms, [](gloo::BarrierOptions &x) { gloo::barrier(x); });
        return;
    }
    case COMM_OP_BROADCAST: {
        if (n == 0)
            return;
        auto o = std::make_shared<gloo::BroadcastOptions>(ctx_);
        o->setOutput(static_cast<uint8_t *>(w->buf), n * esize);
        o->setRoot(w->root);
        guarded(o, tag, ms, [](gloo::BroadcastOptions &x) { gloo::broadcast(x); });
        return;
    }
    case COMM_OP_ALLGATHER: {
        if (n == 0)
            return;
        auto o = std::make_shared<gloo::AllgatherOptions>(ctx_);
        uint8_t *recv = static_cast<uint8_t *>(w->buf);
        const uint8_t *send = static_cast<const uint8_t *>(w->send);
        if (send != recv + (size_t)rank_ * n * esize)
            o->setInput(const_cast<uint8_t *>(send), n * esize);
        o->setOutput(recv, (size_t)world_ * n * esize);
        guarded(o, tag, ms, [](gloo::AllgatherOptions &x) { gloo::allgather(x); });
        return;
    }
    case COMM_OP_ALLREDUCE:
    case COMM_OP_REDUCE: {
        if (n == 0)
            return;
        /* fp32 sums: in place for f32 all-reduce; a reduce keeps the non-roots' buffers as
         * they were (Gloo uses its output as scratch), so it works on a copy */
        float *data = static_cast<float *>(w->buf);
        bool copy = w->dt != COMM_F32 || w->op == COMM_OP_REDUCE;
        if (copy) {
            wide_.resize(n);
            if (w->dt == COMM_F32)
                memcpy(wide_.data(), w->buf, n * sizeof(float));
            else
                gloo_widen(w->dt, w->buf, wide_.data(), n);
            data = wide_.data();
        }
        if (w->op == COMM_OP_ALLREDUCE) {
            auto o = std::make_shared<gloo::AllreduceOptions>(ctx_);
            o->setOutput(data, n);
            o->setReduceFunction(gloo_sum_f32);
            guarded(o, tag, ms, [](gloo::AllreduceOptions &x) { gloo::allreduce(x); });
        } else {
            auto o = std::make_shared<gloo::ReduceOptions>(ctx_);
            o->setOutput(data, n);
            o->setRoot(w->root);
            o->setReduceFunction(gloo_sum_f32);
            guarded(o, tag, ms, [](gloo::ReduceOptions &x) { gloo::reduce(x); });
        }
        if (copy && (w->op == COMM_OP_ALLREDUCE || rank_ == w->root)) {
            if (w->dt == COMM_F32)
                memcpy(w->buf, data, n * sizeof(float));
            else
                gloo_narrow(w->dt, data, w->buf, n);
        }
        return;
    }
    }
}

int GlooComm::run_item(const comm_item *w)
{
    try {
        run(w);
        return 0;
    } catch (const std::exception &e) {
        std::string why = gloo_trim(e.what());
        return error_set("comm gloo: rank %d of %d: %s failed: %s%s (a peer rank died, gave up, "
                         "or is on another collective; timeout %.1f s)", rank_, world_,
                         describe(w).c_str(), why.c_str(), peers_of(why).c_str(),
                         timeout_ms_ / 1000.0);
    } catch (...) {
        return error_set("comm gloo: rank %d of %d: %s failed: an unknown exception", rank_,
                         world_, describe(w).c_str());
    }
}

/* The first failure: the comm is unusable from now on, so close this rank's connections.
 * The peers then fail at once instead of at their timeout, and Gloo's transport thread
 * writes nothing more from the failed collective's buffers: a send still queued from the
 * caller's buffer, which the caller may free once the collective returned its error, was
 * seen to fail inside that thread (writev: Bad address) and terminate the process. */
void GlooComm::failed()
{
    if (ctx_)
        ctx_->closeConnections();
}

/* A collective still running waits for peers that may never come, up to Gloo's timeout, and
 * Gloo cannot cancel it: close this rank's connections (its peers fail at once instead of
 * at their timeout); stop gives it GLOO_ABANDON_MS to end. */
void GlooComm::interrupt(bool running)
{
    if (running && ctx_)
        ctx_->closeConnections();
}

bool GlooComm::stop()
{
    if (comm_queue_stop(q_, GLOO_ABANDON_MS) < 0)
        return false; /* abandoned to the process's exit: its thread keeps this object */
    q_ = nullptr;
    ctx_.reset();
    dev_.reset();
    kept_.clear(); /* after the device (and its thread) */
    return true;
}

/* What the C side holds: standard layout, struct comm first. */
struct gloo_holder {
    struct comm base;
    GlooComm *impl;
};

comm_queue *gloo_q(struct comm *c) { return reinterpret_cast<gloo_holder *>(c)->impl->q_; }

int gloo_c_broadcast(struct comm *c, void *buf, size_t count, enum comm_dtype dt, int root)
{
    return comm_queue_call(gloo_q(c), COMM_OP_BROADCAST, buf, nullptr, count, dt, root);
}

struct comm_work *gloo_c_allreduce_async(struct comm *c, void *buf, size_t count,
                                         enum comm_dtype dt)
{
    return comm_queue_issue(gloo_q(c), COMM_OP_ALLREDUCE, buf, nullptr, count, dt, -1);
}

int gloo_c_wait(struct comm *c, struct comm_work *w, struct comm_span *span)
{
    return comm_queue_wait(gloo_q(c), w, span);
}

int gloo_c_allreduce(struct comm *c, void *buf, size_t count, enum comm_dtype dt)
{
    return comm_queue_call(gloo_q(c), COMM_OP_ALLREDUCE, buf, nullptr, count, dt, -1);
}

int gloo_c_reduce(struct comm *c, void *buf, size_t count, enum comm_dtype dt, int root)
{
    return comm_queue_call(gloo_q(c), COMM_OP_REDUCE, buf, nullptr, count, dt, root);
}

int gloo_c_allgather(struct comm *c, const void *send, void *recv, size_t count,
                     enum comm_dtype dt)
{
    return comm_queue_call(gloo_q(c), COMM_OP_ALLGATHER, recv, send, count, dt, -1);
}

int gloo_c_barrier(struct comm *c)
{
    return comm_queue_call(gloo_q(c), COMM_OP_BARRIER, nullptr, nullptr, 0, COMM_F32, -1);
}

void *gloo_c_stream(struct comm *c) { return (void)c, nullptr; }

/* the core to the loop and comm threads if they can run (comm.h: progress); else back at
 * once */
void gloo_c_progress(struct comm *c)
{
    (void)c;
    sched_yield();
}

void gloo_c_destroy(struct comm *c)
{
    if (!c)
        return;
    gloo_holder *h = reinterpret_cast<gloo_holder *>(c);
    if (h->impl->stop())
        delete h->impl;
    delete h;
}

/* designated initialisers in declaration order (C++20's rule, accepted by g++ before) */
const struct comm gloo_comm_ops = {
    .name = "gloo",
    .rank = 0,
    .world = 0,
    .broadcast = gloo_c_broadcast,
    .allreduce_async = gloo_c_allreduce_async,
    .wait = gloo_c_wait,
    .reduce = gloo_c_reduce,
    .allgather = gloo_c_allgather,
    .barrier = gloo_c_barrier,
    .stream = gloo_c_stream,
    .order = nullptr,
    .destroy = gloo_c_destroy,
    .allreduce = gloo_c_allreduce,
    .join = nullptr,
    .allgather_join = nullptr,
    .settle = nullptr,
    .allreduce_join = nullptr,
    .progress = gloo_c_progress,
};

} // namespace

extern "C" struct comm *comm_gloo_create(struct store *store, const char *key_prefix, int rank,
                                         int world, const char *peer_addr, int timeout_ms)
{
    if (!store || world < 1 || rank < 0 || rank >= world || timeout_ms <= 0) {
        error_set("comm gloo: rank %d of world %d (timeout %d ms): need a store, "
                  "0 <= rank < world and a positive timeout",
                  rank, world, timeout_ms);
        return nullptr;
    }
    gloo_holder *h = new (std::nothrow) gloo_holder();
    GlooComm *impl = h ? new (std::nothrow) GlooComm(rank, world, timeout_ms) : nullptr;
    if (!impl) {
        delete h;
        error_set("comm gloo: rank %d: out of memory", rank);
        return nullptr;
    }
    if (impl->connect(store, key_prefix ? key_prefix : "", peer_addr)) {
        impl->stop(); /* nothing ran: cannot be abandoned */
        delete impl;
        delete h;
        return nullptr;
    }
    h->impl = impl;
    struct comm *c = &h->base;
    *c = gloo_comm_ops;
    c->rank = rank;
    c->world = world;
    return c;
}

extern "C" int comm_gloo_available(void) { return 1; }
