/* test_store_strangers.c — strangers at a real job's rendezvous store (docs/USAGE.md, "What
 * the rendezvous store trusts"): `ddpprof train --cpu 2` on a known --master-port, once alone
 * and once while other processes of this host try its store:
 *   - uid 65534 (nobody) with the job's own secret (read from rank 0's environment, as only
 *     root can): refused as it connects, no challenge;
 *   - this uid with a wrong secret, claiming rank 1: its hello refused;
 *   - this uid speaking the hello of a ddpprof without secrets (rank 1, then SETs of the
 *     keys that carry rank 1's clock offset, host and CPU time into rank 0's meta.csv): refused;
 *   - this uid holding a connection open without a word.
 * The job exits 0 within its time alone + 1 s (a stranger counted as rank 1 used to hold it
 * to the --timeout), every claim is refused, rank 0's log names the strangers' address,
 * and meta.csv holds none of their values.  The secret is on by default: rank 0's
 * environment has one, its command line has not.  Skips (77) where it cannot become uid
 * 65534 (not root). */
#include "comm/store_auth.h"
#include "comm/store_wire.h"
#include "common/clock.h"
#include "store_raw.h"
#include "testutil.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define NOBODY 65534
#define JOB_TIMEOUT_S 20 /* a stranger counted as a rank held the job this long */

static char tmp[512];
static const char *bin;

/* A connection to 127.0.0.1:port (non-blocking once made), or -1. */
static int connect_to(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) < 0) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    return fd;
}

static void send_all(int fd, const void *p, size_t len)
{
    ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
    (void)n;
}

/* The hello of a client with secret (NULL: none), after the server's challenge: 1 when it
 * was accepted, 0 refused, -1 when no challenge came (refused as it connected). */
static int claim(int fd, int rank, int world, const char *secret)
{
    if (store_raw_hello(fd, rank, world, secret) < 0)
        return -1;
    return store_raw_reply(fd, 3.0) == STORE_REPLY_OK;
}

/* What an older client (no secrets) says, then what a stranger accepted as rank 1 would
 * SET: rank 1's clock offset, host and CPU time.  1 when the hello was accepted. */
static int claim_old(int fd)
{
    uint8_t req[64];
    store_wire_put_request(req, STORE_OP_HELLO, 0, 8);
    store_wire_put_u32(req + STORE_REQ_HEADER, 1);
    store_wire_put_u32(req + STORE_REQ_HEADER + 4, 2);
    send_all(fd, req, STORE_REQ_HEADER + 8);
    /* a newer server sent its challenge first: skip it */
    uint8_t h[STORE_REPLY_HEADER];
    int status = -1;
    uint32_t len = 0;
    for (int i = 0; i < 2; i++) {
        if (store_raw_recv(fd, h, sizeof h, 3.0) < 0 || store_wire_decode_reply(h, &status, &len) < 0)
            return 0;
        uint8_t body[64];
        if (len > sizeof body || store_raw_recv(fd, body, len, 3.0) < 0)
            return 0;
        if (!(len == STORE_CHALLENGE_BYTES && memcmp(body, STORE_CHALLENGE_MAGIC, 8) == 0))
            break;
    }
    if (status != STORE_REPLY_OK || len != 0)
        return 0;
    /* again and again for a second, so that they outlast the real rank 1's */
    static const char *const keys[][2] = {{"clock/1", "5000000000000 1"},
                                          {"host/1", "stranger-host"},
                                          {"usage/1", "99.000 99.000 stranger-host"}};
    for (int round = 0; round < 10; round++) {
        for (int k = 0; k < 3; k++) {
            size_t kl = strlen(keys[k][0]), vl = strlen(keys[k][1]) + 1;
            store_wire_put_request(req, STORE_OP_SET, (uint32_t)kl, (uint32_t)vl);
            memcpy(req + STORE_REQ_HEADER, keys[k][0], kl);
            memcpy(req + STORE_REQ_HEADER + kl, keys[k][1], vl);
            send_all(fd, req, STORE_REQ_HEADER + kl + vl);
        }
        clock_sleep_ms(100);
    }
    return 1;
}

/* The job: `ddpprof train --cpu 2` on port, its output in tmp/<name>.log, run dir
 * tmp/<name>. */
static pid_t job_start(const char *name, int port)
{
    char out[700], log[700], p[16];
    snprintf(out, sizeof out, "%s/%s", tmp, name);
    snprintf(log, sizeof log, "%s/%s.log", tmp, name);
    snprintf(p, sizeof p, "%d", port);
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd < 0 || dup2(fd, 1) < 0 || dup2(fd, 2) < 0)
            _exit(99);
        unsetenv("DDPPROF_JOB_SECRET");
        unsetenv("DDPPROF_JOB_SECRET_FILE");
        execl(bin, bin, "train", "--cpu", "2", "--mode", "ddp", "--dataset", "synthetic",
              "--limit", "1024", "--test-limit", "16", "--epochs", "1", "--batch-size", "16",
              "--threads", "1", "--quiet", "--timeout", "20", "--master-port", p, "--out", out,
              (char *)NULL);
        _exit(127);
    }
    return pid;
}

/* A process of ours whose environment says RANK=0 and MASTER_PORT=port (rank 0 of the
 * job), or 0; its DDPPROF_JOB_SECRET into secret ("" if none) and whether its command line
 * holds that secret into *on_cmdline. */
static pid_t find_rank0(int port, char *secret, size_t cap, int *on_cmdline)
{
    char want_port[32];
    snprintf(want_port, sizeof want_port, "MASTER_PORT=%d", port);
    DIR *d = opendir("/proc");
    struct dirent *e;
    pid_t found = 0;
    while (d && !found && (e = readdir(d))) {
        char path[300], buf[65536];
        if (e->d_name[0] < '1' || e->d_name[0] > '9')
            continue;
        snprintf(path, sizeof path, "/proc/%s/environ", e->d_name);
        FILE *f = fopen(path, "r");
        if (!f)
            continue;
        size_t n = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[n] = '\0';
        int port_ok = 0, rank0 = 0;
        const char *sec = "";
        for (size_t i = 0; i < n; i += strlen(buf + i) + 1) {
            port_ok |= strcmp(buf + i, want_port) == 0;
            rank0 |= strcmp(buf + i, "RANK=0") == 0;
            if (strncmp(buf + i, "DDPPROF_JOB_SECRET=", 19) == 0)
                sec = buf + i + 19;
        }
        if (!port_ok || !rank0)
            continue;
        found = (pid_t)atoi(e->d_name);
        snprintf(secret, cap, "%s", sec);
        snprintf(path, sizeof path, "/proc/%s/cmdline", e->d_name);
        f = fopen(path, "r");
        n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
        if (f)
            fclose(f);
        for (size_t i = 0; i < n; i++)
            if (!buf[i])
                buf[i] = ' ';
        buf[n] = '\0';
        *on_cmdline = sec[0] && strstr(buf, sec) != NULL;
    }
    if (d)
        closedir(d);
    return found;
}

/* A free TCP port on loopback (bind port 0 and ask). */
static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof a;
    int port = fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
                       getsockname(fd, (struct sockaddr *)&a, &al) == 0
                   ? ntohs(a.sin_port)
                   : -1;
    if (fd >= 0)
        close(fd);
    return port;
}

static char *slurp(const char *name)
{
    static char buf[65536];
    char path[700];
    snprintf(path, sizeof path, "%s/%s", tmp, name);
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    buf[n] = '\0';
    if (f)
        fclose(f);
    return buf;
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    bin = getenv("DDPPROF");
    if (!bin)
        test_skip("DDPPROF must point at the ddpprof binary");
    if (geteuid() != 0)
        test_skip("needs root, to be a second user of this host (uid 65534) and to read "
                  "rank 0's environment");
    snprintf(tmp, sizeof tmp, "/tmp/test_store_strangers.%d", (int)getpid());
    mkdir(tmp, 0700);

    /* the job alone, for its time */
    int port = free_port();
    double t0 = clock_now_s();
    int st = test_wait_status(job_start("alone", port), 60);
    double alone_s = clock_now_s() - t0;
    CHECK(st == 0, "the job alone: status 0x%x:\n%s", st, slurp("alone.log"));

    /* again, with strangers: they connect as soon as its store listens */
    port = free_port();
    t0 = clock_now_s();
    pid_t job = job_start("attacked", port);
    int fd = -1;
    while (fd < 0 && clock_now_s() - t0 < 10 && waitpid(job, &st, WNOHANG) == 0)
        if ((fd = connect_to(port)) < 0)
            clock_sleep_ms(2);
    CHECK(fd >= 0, "the job's store never listened on %d", port);
    char secret[256] = "";
    int on_cmdline = 1;
    pid_t rank0 = fd >= 0 ? find_rank0(port, secret, sizeof secret, &on_cmdline) : 0;
    CHECK(rank0 > 0 && strlen(secret) == STORE_SECRET_HEX && !on_cmdline,
          "rank 0 (pid %d): secret '%s' (want 64 hex digits in its environment), on its "
          "command line %d", (int)rank0, secret, on_cmdline);

    /* uid 65534 with the job's own secret */
    int pfd[2];
    if (pipe(pfd) != 0)
        return 1;
    fflush(NULL);
    pid_t nobody = fork();
    if (nobody == 0) {
        close(pfd[0]);
        int r = setgid(NOBODY) == 0 && setuid(NOBODY) == 0 ? 0 : 9;
        int got_in = 0;
        for (int tries = 0; r == 0 && tries < 2; tries++) {
            int c = connect_to(port); /* as a ddpprof without secrets, then with the secret */
            if (c >= 0)
                got_in |= tries == 0 ? claim_old(c)
                                     : claim(c, 1, 2, secret) >= 0; /* challenged at all */
            if (c >= 0)
                close(c);
        }
        char msg[8] = {(char)(r ? r : got_in ? 1 : 0)};
        ssize_t w = write(pfd[1], msg, 1);
        (void)w;
        _exit(0);
    }
    close(pfd[1]);
    /* this uid: a wrong secret, the hello of an older ddpprof, and a silent hold */
    int old = connect_to(port), wrong = connect_to(port);
    int old_in = old >= 0 ? claim_old(old) : -2;
    int wrong_in = wrong >= 0 ? claim(wrong, 1, 2, "not-the-job-secret-0123456789") : -2;
    int nobody_said = -1;
    char b = 0;
    struct pollfd pp = {.fd = pfd[0], .events = POLLIN};
    if (poll(&pp, 1, 10000) == 1 && read(pfd[0], &b, 1) == 1)
        nobody_said = b;
    close(pfd[0]);
    test_wait_status(nobody, 10);
    st = test_wait_status(job, 60);
    double attacked_s = clock_now_s() - t0;
    CHECK(nobody_said == 0, "uid %d with the job's secret: %s", NOBODY,
          nobody_said == 1 ? "was challenged (not refused as it connected)"
                           : nobody_said == 9 ? "could not become that user" : "said nothing");
    CHECK(wrong_in == 0, "a wrong secret claiming rank 1: %s",
          wrong_in == 1 ? "accepted" : "no answer");
    CHECK(old_in == 0, "a hello without a secret claiming rank 1 was accepted (and set rank 1's "
          "clock, host and usage keys)");
    if (fd >= 0)
        close(fd);
    if (wrong >= 0)
        close(wrong);
    if (old >= 0)
        close(old);
    const char *log = slurp("attacked.log");
    CHECK(st == 0, "the job with strangers: status 0x%x:\n%s", st, log);
    printf("the job alone: %.2f s; with strangers at its store: %.2f s (%+.2f s)\n", alone_s,
           attacked_s, attacked_s - alone_s);
    CHECK(attacked_s < alone_s + 1.0, "strangers delayed the job: %.2f s, alone %.2f s "
          "(a stranger counted as a rank holds it to the %d s timeout)",
          attacked_s, alone_s, JOB_TIMEOUT_S);
    char want[96];
    snprintf(want, sizeof want, "belongs to uid %d, not this job's uid 0", NOBODY);
    CHECK(strstr(log, "[rank 0] ddpprof: rendezvous store") &&
              strstr(log, "refused a claim to be rank 1 of 2 from 127.0.0.1:") &&
              strstr(log, want) && strstr(log, "not a ddpprof hello"),
          "rank 0's log does not name every stranger:\n%s", log);
    char meta[700];
    snprintf(meta, sizeof meta, "attacked/meta.csv");
    const char *m = slurp(meta);
    CHECK(m[0] && !strstr(m, "stranger-host") && !strstr(m, "5000000000"),
          "meta.csv holds a stranger's values:\n%s", m);

    char cmd[800];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", tmp);
    return test_finish();
}
