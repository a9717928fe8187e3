/* worker_link.c — the worker's messages to its launcher, and reading them (see
 * worker_link.h). */
#include "launch/worker_link.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

static int worker_link_fd = -1;
static int worker_link_opened;

void worker_link_open(void)
{
    if (worker_link_opened)
        return;
    worker_link_opened = 1;
    const char *v = getenv(WORKER_LINK_ENV);
    if (!v || !*v)
        return;
    char *end;
    errno = 0;
    long fd = strtol(v, &end, 10);
    int type = 0;
    socklen_t len = sizeof type;
    if (!errno && *end == '\0' && fd >= 3 && fd < 65536 &&
        getsockopt((int)fd, SOL_SOCKET, SO_TYPE, &type, &len) == 0 && type == SOCK_SEQPACKET) {
        fcntl((int)fd, F_SETFD, FD_CLOEXEC);
        worker_link_fd = (int)fd;
    }
    unsetenv(WORKER_LINK_ENV);
}

void worker_link_say(const char *fmt, ...)
{
    if (worker_link_fd < 0)
        return;
    char msg[WORKER_LINK_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    size_t len = (size_t)n < sizeof msg ? (size_t)n : sizeof msg - 1;
    ssize_t r;
    do
        r = send(worker_link_fd, msg, len, MSG_DONTWAIT | MSG_NOSIGNAL);
    while (r < 0 && errno == EINTR);
}

enum worker_msg_kind worker_link_parse(char *msg, size_t len, struct worker_msg *out)
{
    memset(out, 0, sizeof *out);
    msg[len] = '\0';
    struct worker_progress *p = &out->progress;
    if (strcmp(msg, "joining") == 0)
        out->kind = WORKER_MSG_JOINING;
    else if (strcmp(msg, "ready") == 0)
        out->kind = WORKER_MSG_READY;
    else if (strncmp(msg, "failed ", 7) == 0) {
        out->kind = WORKER_MSG_FAILED;
        out->text = msg + 7;
    } else if (sscanf(msg, "progress %d %d %lld %lld %lf", &p->epoch, &p->epochs, &p->done,
                      &p->total, &p->loss) == 5 &&
               p->epochs > 0 && p->total > 0 && p->done >= 0 && p->done <= p->total)
        out->kind = WORKER_MSG_PROGRESS;
    return out->kind;
}

/* ---------------------------------------------------------------- blame */

/* The rank list "3" or "2, 3" in [s, end) into b.  Returns how many were read. */
static int worker_blame_list(const char *s, const char *end, struct worker_blame *b)
{
    int n = 0;
    while (s < end && b->nranks < WORKER_BLAME_MAX) {
        if (!isdigit((unsigned char)*s))
            break;
        long v = strtol(s, (char **)&s, 10);
        if (v < 0 || v > 1 << 20)
            break;
        b->ranks[b->nranks++] = (int)v;
        n++;
        if (s + 2 <= end && s[0] == ',' && s[1] == ' ')
            s += 2;
        else
            break;
    }
    return n;
}

/* "... rank 1 did not arrive", "... ranks 2, 3 did not arrive": the list before at */
static void worker_blame_before(const char *msg, const char *at, struct worker_blame *b)
{
    const char *q = at;
    while (q > msg && (isdigit((unsigned char)q[-1]) || q[-1] == ',' || q[-1] == ' '))
        q--;
    while (q < at && *q == ' ')
        q++;
    if ((q - msg >= 6 && strncmp(q - 6, "ranks ", 6) == 0) ||
        (q - msg >= 5 && strncmp(q - 5, "rank ", 5) == 0))
        worker_blame_list(q, at, b);
}

int worker_link_blame(const char *message, struct worker_blame *b)
{
    memset(b, 0, sizeof *b);
    if (!message)
        return 0;
    /* the collective: the first "<op> #<seq>", e.g. "all-gather #1607" */
    for (const char *h = strstr(message, " #"); h; h = strstr(h + 2, " #")) {
        if (!isdigit((unsigned char)h[2]))
            continue;
        const char *w = h;
        while (w > message && (islower((unsigned char)w[-1]) || w[-1] == '-'))
            w--;
        if (w == h)
            continue;
        const char *d = h + 2;
        while (isdigit((unsigned char)*d))
            d++;
        snprintf(b->collective, sizeof b->collective, "%.*s", (int)(d - w), w);
        break;
    }
    /* the missing ranks, in the words of each comm */
    const char *p = strstr(message, " did not arrive");
    if (p)
        worker_blame_before(message, p, b);
    if (!b->nranks && (p = strstr(message, " (pid ")) != NULL) { /* "rank 1 (pid 7) died" */
        const char *d = p + 6;
        while (isdigit((unsigned char)*d))
            d++;
        if (strncmp(d, ") died", 6) == 0)
            worker_blame_before(message, p, b);
        b->gone = b->nranks > 0;
    }
    static const char *const peer[] = {"the peer is one of ranks ", "the peer is rank ",
                                       ": rank ", "lost the connection to rank "};
    static const char *const after[] = {"", "", " gave up on the communicator first", "'s store"};
    for (int i = 0; i < 4 && !b->nranks; i++)
        for (p = strstr(message, peer[i]); p && !b->nranks; p = strstr(p + 1, peer[i])) {
            const char *list = p + strlen(peer[i]), *end = list;
            while (isdigit((unsigned char)*end) || (end[0] == ',' && end[1] == ' '))
                end += end[0] == ',' ? 2 : 1;
            if (strncmp(end, after[i], strlen(after[i])) == 0 && worker_blame_list(list, end, b))
                b->gone = i >= 2;
        }
    return b->collective[0] || b->nranks;
}
