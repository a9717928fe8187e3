/* flight.c — the comms' flight recorder (see flight.h): a ring of the last collectives,
 * dumped as CSV when one fails, and the reader the launcher uses. */
#include "comm/flight.h"

#include "common/clock.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct flight_entry {
    uint64_t seq; /* 0: empty */
    const char *kind;
    int bucket;
    uint64_t bytes;
    enum flight_state state;
    int64_t queued_ns, started_ns, ended_ns;
};

struct flight {
    pthread_mutex_t mu;
    int rank, dumped;
    uint64_t last; /* highest seq recorded */
    struct flight_entry e[FLIGHT_ENTRIES];
};

static char flight_dir[4096];
static _Thread_local int flight_bucket_hint = -1;

void flight_next_bucket(int bucket)
{
    flight_bucket_hint = bucket;
}

static const char *const flight_state_names[] = {"queued", "started", "done", "failed"};

void flight_set_dir(const char *dir)
{
    snprintf(flight_dir, sizeof flight_dir, "%s", dir ? dir : "");
}

struct flight *flight_create(int rank)
{
    struct flight *f = calloc(1, sizeof *f);
    if (!f)
        return NULL;
    pthread_mutex_init(&f->mu, NULL);
    f->rank = rank;
    return f;
}

void flight_free(struct flight *f)
{
    if (!f)
        return;
    pthread_mutex_destroy(&f->mu);
    free(f);
}

void flight_queued(struct flight *f, uint64_t seq, const char *kind, int bucket, uint64_t bytes)
{
    if (!f || !seq)
        return;
    if (bucket < 0)
        bucket = flight_bucket_hint;
    pthread_mutex_lock(&f->mu);
    struct flight_entry *e = &f->e[seq % FLIGHT_ENTRIES];
    *e = (struct flight_entry){.seq = seq, .kind = kind, .bucket = bucket, .bytes = bytes,
                               .state = FLIGHT_QUEUED, .queued_ns = clock_now_ns()};
    if (seq > f->last)
        f->last = seq;
    pthread_mutex_unlock(&f->mu);
}

void flight_set_state(struct flight *f, uint64_t seq, enum flight_state st)
{
    if (!f || !seq)
        return;
    pthread_mutex_lock(&f->mu);
    struct flight_entry *e = &f->e[seq % FLIGHT_ENTRIES];
    if (e->seq == seq) {
        e->state = st;
        if (st == FLIGHT_STARTED)
            e->started_ns = clock_now_ns();
        else if (st != FLIGHT_QUEUED)
            e->ended_ns = clock_now_ns();
    }
    pthread_mutex_unlock(&f->mu);
}

int flight_dump(struct flight *f)
{
    if (!f || !flight_dir[0])
        return -1;
    pthread_mutex_lock(&f->mu);
    if (f->dumped) {
        pthread_mutex_unlock(&f->mu);
        return 0;
    }
    f->dumped = 1;
    char path[4200], tmp[4250];
    snprintf(path, sizeof path, "%s/" FLIGHT_FILE_FORMAT, flight_dir, f->rank);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *out = fopen(tmp, "w");
    int rc = -1;
    if (out) {
        fputs(FLIGHT_HEADER, out);
        uint64_t first = f->last > FLIGHT_ENTRIES ? f->last - FLIGHT_ENTRIES + 1 : 1;
        for (uint64_t s = first; f->last && s <= f->last; s++) {
            const struct flight_entry *e = &f->e[s % FLIGHT_ENTRIES];
            if (e->seq != s)
                continue;
            fprintf(out, "%d,%llu,%s,%d,%llu,%s,%lld,%lld,%lld\n", f->rank,
                    (unsigned long long)e->seq, e->kind, e->bucket,
                    (unsigned long long)e->bytes, flight_state_names[e->state],
                    (long long)e->queued_ns, (long long)e->started_ns, (long long)e->ended_ns);
        }
        /* whole or absent: written aside, then renamed */
        rc = fclose(out) == 0 && rename(tmp, path) == 0 ? 0 : -1;
        if (rc)
            remove(tmp);
    }
    pthread_mutex_unlock(&f->mu);
    return rc;
}
