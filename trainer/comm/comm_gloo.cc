/* comm_gloo.cc — the gloo transport of struct comm (see comm_gloo.h); the only C++ in the
 * trainer: a thin shim that turns Gloo's C++ API (exceptions, shared_ptr contexts, options
 * objects) into the C ops table.  No exception leaves this file: each one becomes an
 * error_set status.
 *
 * Layout: struct gloo_holder (plain C: struct comm first, then a pointer) is what the C side
 * sees; class GlooComm owns the Gloo context, the TCP device, the comm thread and its queue.
 * The collectives run one at a time in issue order, each with Gloo's own timeout: on the
 * comm thread, or on a caller that waits for the next one before the comm thread took it;
 * callers queue work and sleep on a condition variable until it is done. */
#include "comm/comm_gloo.h"

#include "comm/flight.h"
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
#include <netdb.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace {

/* destroy: how long a running collective gets to end once the connections are closed */
constexpr int GLOO_ABANDON_MS = 200;

enum gloo_op { GLOO_BROADCAST, GLOO_ALLREDUCE, GLOO_REDUCE, GLOO_ALLGATHER, GLOO_BARRIER };

const char *gloo_op_name(int op)
{
    switch (op) {
    case GLOO_BROADCAST: return "broadcast";
    case GLOO_ALLREDUCE: return "all-reduce";
    case GLOO_REDUCE: return "reduce";
    case GLOO_ALLGATHER: return "all-gather";
    case GLOO_BARRIER: return "barrier";
    }
    return "?";
}

const char *gloo_dtype_name(int dt)
{
    switch (dt) {
    case COMM_F32: return "f32";
    case COMM_F16: return "f16";
    case COMM_BF16: return "bf16";
    }
    return "?";
}

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

} // namespace

/* An in-flight collective (comm.h's opaque handle). */
struct comm_work {
    gloo_op op;
    void *buf;
    const void *send;
    size_t count;
    comm_dtype dt;
    int root;
    uint64_t seq;
    bool done;
    int status;
    int64_t start_ns, end_ns;
    std::string msg; /* the comm thread's error message when status is -1 */
};

namespace {

class GlooComm {
  public:
    GlooComm(int rank, int world, int timeout_ms)
        : rank_(rank), world_(world), timeout_ms_(timeout_ms), flight_(flight_create(rank))
    {
    }

    ~GlooComm()
    {
        stop();
        flight_free(flight_);
    }

    /* 0 or -1 (error_set) */
    int connect(struct store *s, const std::string &prefix, const char *peer_addr);

    comm_work *issue(gloo_op op, void *buf, const void *send, size_t count, comm_dtype dt,
                     int root);
    int wait(comm_work *w, struct comm_span *span);
    int issue_wait(gloo_op op, void *buf, const void *send, size_t count, comm_dtype dt,
                   int root)
    {
        comm_work *w = issue(op, buf, send, count, dt, root);
        return w ? wait(w, nullptr) : -1;
    }
    /* Stop the comm thread and release everything; false when a running collective had
     * to be abandoned (then nothing may be freed: the thread still uses this object). */
    bool stop();

  private:
    void thread_main();
    void execute(std::unique_lock<std::mutex> &lock);
    void run(comm_work *w);
    template <typename Options, typename Fn>
    void guarded(const std::shared_ptr<Options> &o, uint32_t tag, std::chrono::milliseconds ms,
                 Fn fn);
    std::string describe(const comm_work *w) const;
    std::string peers_of(const std::string &msg) const;

    const int rank_, world_, timeout_ms_;
    std::vector<std::shared_ptr<void>> kept_; /* failed collectives' options: see guarded */
    std::shared_ptr<gloo::transport::Device> dev_;
    std::shared_ptr<gloo::rendezvous::Context> ctx_;
    std::vector<std::string> addrs_; /* each rank's listening address */
    std::vector<float> wide_;        /* fp32 scratch of half-precision sums (comm thread) */

    std::thread thread_;
    std::mutex mu_;
    std::condition_variable work_cv_, done_cv_;
    std::deque<comm_work *> queue_;
    std::set<comm_work *> live_; /* issued, not yet waited */
    uint64_t issued_ = 0;
    bool stopping_ = false;
    bool running_ = false; /* a collective is running (on the comm thread or a waiter) */
    std::string failure_; /* the first error: every later call repeats it */
    struct flight *flight_; /* the last collectives, dumped at the first failure (NULL: none) */
};

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
        dev_ = gloo::transport::tcp::CreateDevice(attr);
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
        thread_ = std::thread(&GlooComm::thread_main, this);
    } catch (const std::exception &e) {
        rc = error_set("comm gloo: rank %d of %d: connecting on %s failed: %s", rank_, world_,
                       where.c_str(), gloo_trim(e.what()).c_str());
    }
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
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

std::string GlooComm::describe(const comm_work *w) const
{
    char text[256];
    if (w->op == GLOO_BARRIER)
        snprintf(text, sizeof text, "barrier #%llu", (unsigned long long)w->seq);
    else if (w->op == GLOO_BROADCAST || w->op == GLOO_REDUCE)
        snprintf(text, sizeof text, "%s #%llu (%zu %s, root %d)", gloo_op_name(w->op),
                 (unsigned long long)w->seq, w->count, gloo_dtype_name(w->dt), w->root);
    else
        snprintf(text, sizeof text, "%s #%llu (%zu %s)", gloo_op_name(w->op),
                 (unsigned long long)w->seq, w->count, gloo_dtype_name(w->dt));
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

void GlooComm::run(comm_work *w)
{
    const size_t n = w->count, esize = comm_dtype_size(w->dt);
    const uint32_t tag = (uint32_t)w->seq;
    auto ms = std::chrono::milliseconds(timeout_ms_);
    switch (w->op) {
    case GLOO_BARRIER: {
        auto o = std::make_shared<gloo::BarrierOptions>(ctx_);
        guarded(o, tag, ms, [](gloo::BarrierOptions &x) { gloo::barrier(x); });
        return;
    }
    case GLOO_BROADCAST: {
        if (n == 0)
            return;
        auto o = std::make_shared<gloo::BroadcastOptions>(ctx_);
        o->setOutput(static_cast<uint8_t *>(w->buf), n * esize);
        o->setRoot(w->root);
        guarded(o, tag, ms, [](gloo::BroadcastOptions &x) { gloo::broadcast(x); });
        return;
    }
    case GLOO_ALLGATHER: {
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
    case GLOO_ALLREDUCE:
    case GLOO_REDUCE: {
        if (n == 0)
            return;
        /* fp32 sums: in place for f32 all-reduce; a reduce keeps the non-roots' buffers as
         * they were (Gloo uses its output as scratch), so it works on a copy */
        float *data = static_cast<float *>(w->buf);
        bool copy = w->dt != COMM_F32 || w->op == GLOO_REDUCE;
        if (copy) {
            wide_.resize(n);
            if (w->dt == COMM_F32)
                memcpy(wide_.data(), w->buf, n * sizeof(float));
            else
                gloo_widen(w->dt, w->buf, wide_.data(), n);
            data = wide_.data();
        }
        if (w->op == GLOO_ALLREDUCE) {
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
        if (copy && (w->op == GLOO_ALLREDUCE || rank_ == w->root)) {
            if (w->dt == COMM_F32)
                memcpy(w->buf, data, n * sizeof(float));
            else
                gloo_narrow(w->dt, data, w->buf, n);
        }
        return;
    }
    }
}

/* Run the collective at the front of the queue; called with the lock held, by the comm
 * thread or by a caller waiting for it (see wait), and returns with it held. */
void GlooComm::execute(std::unique_lock<std::mutex> &lock)
{
    comm_work *w = queue_.front();
    queue_.pop_front();
    bool failed = !failure_.empty();
    running_ = true;
    lock.unlock();
    w->start_ns = clock_now_ns();
    flight_set_state(flight_, w->seq, FLIGHT_STARTED);
    std::string msg;
    if (!failed) { /* a broken comm fails at once with its first error */
        try {
            run(w);
        } catch (const std::exception &e) {
            std::string why = gloo_trim(e.what());
            char secs[32];
            snprintf(secs, sizeof secs, "%.1f", timeout_ms_ / 1000.0);
            msg = "comm gloo: rank " + std::to_string(rank_) + " of " + std::to_string(world_) +
                  ": " + describe(w) + " failed: " + why + peers_of(why) +
                  " (a peer rank died, gave up, or is on another collective; timeout " + secs +
                  " s)";
        }
    }
    w->end_ns = clock_now_ns();
    flight_set_state(flight_, w->seq, failed || !msg.empty() ? FLIGHT_FAILED : FLIGHT_DONE);
    if (!failed && !msg.empty())
        flight_dump(flight_); /* the first failure: where this rank was, beside its trace */
    lock.lock();
    running_ = false;
    if (failed) {
        w->status = -1;
        w->msg = failure_;
    } else if (!msg.empty()) {
        w->status = -1;
        w->msg = failure_ = msg;
    }
    w->done = true;
    done_cv_.notify_all(); /* its waiter, and stop() */
    work_cv_.notify_one(); /* the comm thread, for what was queued meanwhile */
}

void GlooComm::thread_main()
{
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
        work_cv_.wait(lock, [this] { return stopping_ || (!queue_.empty() && !running_); });
        if (queue_.empty())
            return; /* stopping with nothing queued */
        if (!running_)
            execute(lock);
    }
}

comm_work *GlooComm::issue(gloo_op op, void *buf, const void *send, size_t count, comm_dtype dt,
                           int root)
{
    if (comm_dtype_size(dt) == 0) {
        error_set("comm gloo: rank %d: %s with unknown dtype %d", rank_, gloo_op_name(op),
                  (int)dt);
        return nullptr;
    }
    if ((op == GLOO_BROADCAST || op == GLOO_REDUCE) && (root < 0 || root >= world_)) {
        error_set("comm gloo: rank %d: %s root %d is not a rank of world %d", rank_,
                  gloo_op_name(op), root, world_);
        return nullptr;
    }
    comm_work *w = new (std::nothrow) comm_work();
    if (!w) {
        error_set("comm gloo: rank %d: out of memory issuing a %s", rank_, gloo_op_name(op));
        return nullptr;
    }
    w->op = op;
    w->buf = buf;
    w->send = send;
    w->count = count;
    w->dt = dt;
    w->root = root;
    std::lock_guard<std::mutex> lock(mu_);
    w->seq = ++issued_;
    uint64_t bytes = (uint64_t)count * comm_dtype_size(dt);
    flight_queued(flight_, w->seq, gloo_op_name(op), -1,
                  op == GLOO_ALLGATHER ? bytes * (uint64_t)world_ : bytes);
    queue_.push_back(w);
    live_.insert(w);
    work_cv_.notify_one();
    return w;
}

int GlooComm::wait(comm_work *w, struct comm_span *span)
{
    if (!w)
        return error_set("comm gloo: rank %d: wait on a NULL handle (did allreduce_async fail?)",
                         rank_);
    std::unique_lock<std::mutex> lock(mu_);
    /* Bounded: every collective has Gloo's timeout.  A collective the comm thread has not
     * started yet, and that is next in order, is run here on the waiting thread: a blocking
     * collective then costs no hand-over to the comm thread and back (on a busy core each
     * is a scheduler wake-up), and an all-reduce still queued at wait overlaps nothing. */
    while (!w->done) {
        if (!running_ && !queue_.empty() && queue_.front() == w)
            execute(lock);
        else
            done_cv_.wait(lock);
    }
    live_.erase(w);
    lock.unlock();
    int rc = w->status;
    if (rc < 0)
        error_set("%s", w->msg.c_str());
    if (span) {
        span->start_ns = w->start_ns;
        span->end_ns = w->end_ns;
    }
    delete w;
    return rc;
}

bool GlooComm::stop()
{
    {
        std::unique_lock<std::mutex> lock(mu_);
        stopping_ = true;
        /* what is queued behind the running collective is not run */
        for (comm_work *w : queue_) {
            w->done = true;
            w->status = -1;
            w->msg = "comm gloo: rank " + std::to_string(rank_) + ": destroyed";
        }
        queue_.clear();
        work_cv_.notify_all();
        /* A collective still running waits for peers that may never come, up to Gloo's
         * timeout, and Gloo cannot cancel it: close this rank's connections (its peers fail
         * at once instead of at their timeout) and give it a moment to end.  If it does not,
         * it is abandoned to the process's exit: its thread keeps this object (not freed). */
        if (running_ && ctx_) {
            ctx_->closeConnections();
            done_cv_.wait_for(lock, std::chrono::milliseconds(GLOO_ABANDON_MS),
                              [this] { return !running_; });
            if (running_) {
                thread_.detach();
                return false;
            }
        }
    }
    if (thread_.joinable())
        thread_.join();
    for (comm_work *w : live_)
        delete w;
    live_.clear();
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

GlooComm *gloo_impl(struct comm *c) { return reinterpret_cast<gloo_holder *>(c)->impl; }

int gloo_c_broadcast(struct comm *c, void *buf, size_t count, enum comm_dtype dt, int root)
{
    return gloo_impl(c)->issue_wait(GLOO_BROADCAST, buf, nullptr, count, dt, root);
}

struct comm_work *gloo_c_allreduce_async(struct comm *c, void *buf, size_t count,
                                         enum comm_dtype dt)
{
    return gloo_impl(c)->issue(GLOO_ALLREDUCE, buf, nullptr, count, dt, -1);
}

int gloo_c_wait(struct comm *c, struct comm_work *w, struct comm_span *span)
{
    return gloo_impl(c)->wait(w, span);
}

int gloo_c_reduce(struct comm *c, void *buf, size_t count, enum comm_dtype dt, int root)
{
    return gloo_impl(c)->issue_wait(GLOO_REDUCE, buf, nullptr, count, dt, root);
}

int gloo_c_allgather(struct comm *c, const void *send, void *recv, size_t count,
                     enum comm_dtype dt)
{
    return gloo_impl(c)->issue_wait(GLOO_ALLGATHER, recv, send, count, dt, -1);
}

int gloo_c_barrier(struct comm *c)
{
    return gloo_impl(c)->issue_wait(GLOO_BARRIER, nullptr, nullptr, 0, COMM_F32, -1);
}

void *gloo_c_stream(struct comm *c) { return (void)c, nullptr; }

void gloo_c_destroy(struct comm *c)
{
    if (!c)
        return;
    gloo_holder *h = reinterpret_cast<gloo_holder *>(c);
    if (h->impl->stop())
        delete h->impl;
    delete h;
}

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
        delete impl;
        delete h;
        return nullptr;
    }
    h->impl = impl;
    struct comm *c = &h->base;
    c->name = "gloo";
    c->rank = rank;
    c->world = world;
    c->broadcast = gloo_c_broadcast;
    c->allreduce_async = gloo_c_allreduce_async;
    c->wait = gloo_c_wait;
    c->reduce = gloo_c_reduce;
    c->allgather = gloo_c_allgather;
    c->barrier = gloo_c_barrier;
    c->stream = gloo_c_stream;
    c->destroy = gloo_c_destroy;
    return c;
}

extern "C" int comm_gloo_available(void) { return 1; }
