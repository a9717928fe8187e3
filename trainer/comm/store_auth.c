/* store_auth.c — the rendezvous store's job secret, handshake MACs and peer-uid check (see
 * store_auth.h). */
#include "comm/store_auth.h"

#include "common/error.h"
#include "common/sha256.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#define STORE_AUTH_TCP_ESTABLISHED 1 /* the kernel's TCP_ESTABLISHED state */

int store_auth_host_is_loopback(const char *host)
{
    struct in_addr a;
    if (!host)
        return 0;
    if (strcmp(host, "localhost") == 0)
        return 1;
    return inet_pton(AF_INET, host, &a) == 1 && (ntohl(a.s_addr) >> 24) == 127;
}

int store_auth_from_secret(struct store_auth *a, const void *secret, size_t len)
{
    memset(a, 0, sizeof *a);
    if (len < STORE_SECRET_MIN || len > STORE_SECRET_MAX)
        return error_set("store: a job secret of %zu bytes: it needs %d to %d", len,
                         STORE_SECRET_MIN, STORE_SECRET_MAX);
    a->mode = STORE_AUTH_SECRET;
    a->len = len;
    memcpy(a->secret, secret, len);
    return 0;
}

/* The secret in the file named by DDPPROF_JOB_SECRET_FILE, which must be ours alone. */
static int store_auth_from_file(struct store_auth *a, const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0)
        return error_set("store: " STORE_SECRET_FILE_ENV "=%s: cannot open it: %s", path,
                         strerror(errno));
    struct stat st;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return error_set("store: " STORE_SECRET_FILE_ENV "=%s is not a regular file", path);
    }
    if (st.st_uid != geteuid() || (st.st_mode & 077)) {
        close(fd);
        return error_set("store: " STORE_SECRET_FILE_ENV "=%s (owner uid %u, mode %04o) may be "
                         "read or changed by others: it must be this user's (uid %u) with mode "
                         "0600 or stricter (chmod 600 it)",
                         path, (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777),
                         (unsigned)geteuid());
    }
    uint8_t buf[STORE_SECRET_MAX + 3];
    size_t len = 0;
    for (;;) {
        ssize_t n = read(fd, buf + len, sizeof buf - len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            int e = errno;
            close(fd);
            return error_set("store: " STORE_SECRET_FILE_ENV "=%s: cannot read it: %s", path,
                             strerror(e));
        }
        if (n == 0 || (len += (size_t)n) == sizeof buf)
            break;
    }
    close(fd);
    if (len && buf[len - 1] == '\n') /* the line break `echo` or an editor leaves */
        len--;
    if (len && buf[len - 1] == '\r')
        len--;
    if (len < STORE_SECRET_MIN || len > STORE_SECRET_MAX) {
        mem_wipe(buf, sizeof buf);
        return error_set("store: " STORE_SECRET_FILE_ENV "=%s holds %s%zu bytes: a job secret "
                         "needs %d to %d (e.g. head -c 32 /dev/urandom | base64 > FILE)",
                         path, len > STORE_SECRET_MAX ? "more than " : "",
                         len > STORE_SECRET_MAX ? (size_t)STORE_SECRET_MAX : len,
                         STORE_SECRET_MIN, STORE_SECRET_MAX);
    }
    int rc = store_auth_from_secret(a, buf, len);
    mem_wipe(buf, sizeof buf);
    return rc;
}

int store_auth_from_env(struct store_auth *a, const char *host)
{
    memset(a, 0, sizeof *a);
    const char *s = getenv(STORE_SECRET_ENV), *file = getenv(STORE_SECRET_FILE_ENV);
    if (s && *s) {
        if (strcmp(s, STORE_SECRET_NONE) == 0) {
            a->mode = STORE_AUTH_OPEN;
            return 0;
        }
        size_t len = strlen(s);
        if (len < STORE_SECRET_MIN || len > STORE_SECRET_MAX)
            return error_set("store: " STORE_SECRET_ENV " is %zu bytes long: a job secret needs "
                             "%d to %d (e.g. head -c 32 /dev/urandom | base64), or '"
                             STORE_SECRET_NONE "' for none",
                             len, STORE_SECRET_MIN, STORE_SECRET_MAX);
        return store_auth_from_secret(a, s, len);
    }
    if (file && *file)
        return store_auth_from_file(a, file);
    if (store_auth_host_is_loopback(host)) {
        a->mode = STORE_AUTH_LOCAL;
        return 0;
    }
    return error_set("store: MASTER_ADDR %s is not a loopback address, so rank 0's store can be "
                     "reached from other hosts, and no job secret is set: set "
                     STORE_SECRET_ENV " (16+ bytes) or " STORE_SECRET_FILE_ENV " (a file of "
                     "mode 0600) to the same secret on every node, or " STORE_SECRET_ENV "="
                     STORE_SECRET_NONE " to run without one (anyone who reaches the port may "
                     "join)",
                     host ? host : "(null)");
}

int store_auth_random(void *buf, size_t n)
{
    uint8_t *p = buf;
    while (n) {
        ssize_t got = getrandom(p, n, 0);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0 && errno == ENOSYS)
            break; /* an old kernel: /dev/urandom */
        if (got < 0)
            return error_set("store: no random bytes from the kernel: %s", strerror(errno));
        p += got;
        n -= (size_t)got;
    }
    if (!n)
        return 0;
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    while (fd >= 0 && n) {
        ssize_t got = read(fd, p, n);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            break;
        p += got;
        n -= (size_t)got;
    }
    if (fd >= 0)
        close(fd);
    return n ? error_set("store: cannot read random bytes from /dev/urandom") : 0;
}

int store_auth_new_secret(char hex[STORE_SECRET_HEX + 1])
{
    static const char digits[] = "0123456789abcdef";
    uint8_t raw[STORE_SECRET_HEX / 2];
    if (store_auth_random(raw, sizeof raw))
        return -1;
    for (size_t i = 0; i < sizeof raw; i++) {
        hex[2 * i] = digits[raw[i] >> 4];
        hex[2 * i + 1] = digits[raw[i] & 15];
    }
    hex[STORE_SECRET_HEX] = '\0';
    mem_wipe(raw, sizeof raw);
    return 0;
}

void store_auth_mac(const struct store_auth *a, int from_server,
                    const uint8_t server_nonce[STORE_NONCE_BYTES],
                    const uint8_t client_nonce[STORE_NONCE_BYTES], uint32_t rank, uint32_t world,
                    uint8_t out[STORE_MAC_BYTES])
{
    /* the label keeps a client's proof from ever serving as a server's, and the NUL ends it */
    static const char hello[] = "ddpprof-store-hello", welcome[] = "ddpprof-store-welcome";
    uint8_t ids[8];
    for (int i = 0; i < 4; i++) {
        ids[i] = (uint8_t)(rank >> (8 * i));
        ids[4 + i] = (uint8_t)(world >> (8 * i));
    }
    struct hmac_sha256 h;
    hmac_sha256_init(&h, a->secret, a->len);
    if (from_server)
        hmac_sha256_update(&h, welcome, sizeof welcome);
    else
        hmac_sha256_update(&h, hello, sizeof hello);
    hmac_sha256_update(&h, server_nonce, STORE_NONCE_BYTES);
    hmac_sha256_update(&h, client_nonce, STORE_NONCE_BYTES);
    hmac_sha256_update(&h, ids, sizeof ids);
    hmac_sha256_final(&h, out);
}

int store_auth_check(const struct store_auth *a, int from_server,
                     const uint8_t server_nonce[STORE_NONCE_BYTES],
                     const uint8_t client_nonce[STORE_NONCE_BYTES], uint32_t rank,
                     uint32_t world, const uint8_t mac[STORE_MAC_BYTES])
{
    uint8_t want[STORE_MAC_BYTES];
    store_auth_mac(a, from_server, server_nonce, client_nonce, rank, world, want);
    int ok = mem_equal_ct(want, mac, STORE_MAC_BYTES);
    mem_wipe(want, sizeof want);
    return ok;
}

/* The kernel's socket diagnostics, asked for the one socket whose own address is `local`
 * and whose peer is `remote` (IPv4): 1 found, 0 no such socket, -1 cannot ask (errno). */
static int store_auth_diag(const struct sockaddr_in *local, const struct sockaddr_in *remote,
                           uid_t *uid, int *established)
{
    int nl = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
    if (nl < 0)
        return -1;
    struct timeval tv = {.tv_sec = 0, .tv_usec = 200000}; /* the kernel answers at once */
    setsockopt(nl, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    struct {
        struct nlmsghdr nlh;
        struct inet_diag_req_v2 req;
    } msg;
    memset(&msg, 0, sizeof msg);
    msg.nlh.nlmsg_len = sizeof msg;
    msg.nlh.nlmsg_type = SOCK_DIAG_BY_FAMILY;
    msg.nlh.nlmsg_flags = NLM_F_REQUEST; /* one exact socket, not a dump */
    msg.nlh.nlmsg_seq = 1;
    msg.req.sdiag_family = AF_INET;
    msg.req.sdiag_protocol = IPPROTO_TCP;
    msg.req.idiag_states = ~0u;
    msg.req.id.idiag_sport = local->sin_port;
    msg.req.id.idiag_dport = remote->sin_port;
    msg.req.id.idiag_src[0] = local->sin_addr.s_addr;
    msg.req.id.idiag_dst[0] = remote->sin_addr.s_addr;
    msg.req.id.idiag_cookie[0] = msg.req.id.idiag_cookie[1] = INET_DIAG_NOCOOKIE;
    struct sockaddr_nl kernel = {.nl_family = AF_NETLINK};
    if (sendto(nl, &msg, sizeof msg, 0, (struct sockaddr *)&kernel, sizeof kernel) < 0) {
        int e = errno;
        close(nl);
        errno = e;
        return -1;
    }
    long buf[1024]; /* aligned for nlmsghdr */
    ssize_t n;
    while ((n = recv(nl, buf, sizeof buf, 0)) < 0 && errno == EINTR)
        ;
    int e = errno;
    close(nl);
    if (n < 0) {
        errno = e;
        return -1;
    }
    for (struct nlmsghdr *h = (struct nlmsghdr *)buf; NLMSG_OK(h, (size_t)n);
         h = NLMSG_NEXT(h, n)) {
        if (h->nlmsg_type == NLMSG_ERROR) {
            const struct nlmsgerr *err = NLMSG_DATA(h);
            if (h->nlmsg_len < NLMSG_LENGTH(sizeof *err))
                break;
            if (err->error == -ENOENT)
                return 0;
            errno = -err->error;
            return -1;
        }
        if (h->nlmsg_type == SOCK_DIAG_BY_FAMILY &&
            h->nlmsg_len >= NLMSG_LENGTH(sizeof(struct inet_diag_msg))) {
            const struct inet_diag_msg *d = NLMSG_DATA(h);
            *uid = (uid_t)d->idiag_uid;
            *established = d->idiag_state == STORE_AUTH_TCP_ESTABLISHED;
            return 1;
        }
    }
    errno = EPROTO;
    return -1;
}

/* The same from /proc/net/tcp, where the diagnostics cannot be asked (a sandbox): its rows
 * are "sl local rem st queues tr retrnsmt uid timeout inode ...", addresses as the kernel's
 * hex of the network-order word and the port. */
static int store_auth_proc(const struct sockaddr_in *local, const struct sockaddr_in *remote,
                           uid_t *uid, int *established)
{
    FILE *f = fopen("/proc/net/tcp", "re");
    if (!f)
        return -1;
    char want_l[32], want_r[32], line[512];
    snprintf(want_l, sizeof want_l, "%08X:%04X", (unsigned)local->sin_addr.s_addr,
             (unsigned)ntohs(local->sin_port));
    snprintf(want_r, sizeof want_r, "%08X:%04X", (unsigned)remote->sin_addr.s_addr,
             (unsigned)ntohs(remote->sin_port));
    int found = 0;
    while (!found && fgets(line, sizeof line, f)) {
        char l[64], r[64];
        unsigned st = 0, u = 0;
        if (sscanf(line, " %*s %63s %63s %x %*s %*s %*s %u", l, r, &st, &u) == 4 &&
            strcmp(l, want_l) == 0 && strcmp(r, want_r) == 0) {
            found = 1;
            *uid = (uid_t)u;
            *established = st == STORE_AUTH_TCP_ESTABLISHED;
        }
    }
    fclose(f);
    return found;
}

int store_auth_peer_uid(int fd, uid_t *uid, int *established)
{
    struct sockaddr_in self, peer;
    socklen_t sl = sizeof self, pl = sizeof peer;
    if (getsockname(fd, (struct sockaddr *)&self, &sl) < 0 ||
        getpeername(fd, (struct sockaddr *)&peer, &pl) < 0)
        return -1;
    if (self.sin_family != AF_INET || peer.sin_family != AF_INET)
        return 0; /* the store speaks IPv4 only; an IPv6 peer is not asked about */
    int r = store_auth_diag(&peer, &self, uid, established);
    if (r >= 0)
        return r;
    int e = errno;
    r = store_auth_proc(&peer, &self, uid, established);
    if (r < 0)
        errno = e;
    return r;
}

void store_auth_warn_open(const char *what)
{
    static atomic_int warned;
    if (atomic_exchange(&warned, 1))
        return;
    fprintf(stderr, "ddpprof: warning: " STORE_SECRET_ENV "=" STORE_SECRET_NONE ": %s serves "
            "anyone who reaches it and says a valid hello (no job secret); other users of "
            "this host are still refused\n", what);
}
