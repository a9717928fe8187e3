/* repeats.c — the main job's repeats (see repeats.h; report/FORMULAS.md "Repeats"). */
#include "report/analysis/repeats.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/error.h"

static int is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static void repeat_add(struct repeats *p, const struct run_stat *s)
{
    if (p->n >= REPORT_MAX_REPEATS)
        return;
    p->n++;
    if (s->has_wall)
        p->wall[p->nwall++] = s->wall_s;
    if (s->has_ips)
        p->ips[p->nips++] = s->images_per_s;
    if (s->has_speedup)
        p->speedup[p->nspeedup++] = s->speedup;
}

/* "a/b/c" -> the length of "a/b" (0 when there is no slash) */
static size_t parent_len(const char *dir)
{
    const char *slash = strrchr(dir, '/');
    return slash ? (size_t)(slash - dir) : 0;
}

static const char *base_of(const char *dir)
{
    const char *slash = strrchr(dir, '/');
    return slash ? slash + 1 : dir;
}

static int same_parent(const char *a, const char *b)
{
    size_t la = parent_len(a), lb = parent_len(b);
    return la == lb && strncmp(a, b, la) == 0;
}

int repeats_read(const struct runset *rs, const struct run_stat *st, int warmup,
                          struct repeats *rep)
{
    for (int i = 0; i < rs->n; i++)
        repeat_add(&rep[i], &st[i]);
    for (int i = 0; i < rs->n; i++) {
        const struct run *r = &rs->runs[i];
        int seen = 0;
        for (int j = 0; j < i && !seen; j++)
            seen = same_parent(rs->runs[j].dir, r->dir);
        if (seen || !r->format || strcmp(r->format, "ddpprof") != 0)
            continue;
        size_t plen = parent_len(r->dir);
        for (int k = 2; k <= REPORT_MAX_REPEATS; k++) {
            char *dir = NULL;
            if (asprintf(&dir, "%.*s%srepeat-%d", (int)plen, r->dir, plen ? "/" : "", k) < 0)
                return error_set("report: out of memory");
            if (!is_dir(dir)) {
                free(dir);
                break;
            }
            struct runset sub;
            runset_init(&sub);
            struct run_stat *sst = NULL;
            int rc = runset_add_dir(&sub, dir);
            if (rc == 0)
                rc = runset_finish(&sub);
            if (rc == 0 && !(sst = analysis_run_warmup(&sub, warmup)))
                rc = -1;
            for (int q = 0; q < sub.n && rc == 0; q++)
                for (int j = i; j < rs->n; j++)
                    if (same_parent(rs->runs[j].dir, r->dir) &&
                        strcmp(base_of(rs->runs[j].dir), base_of(sub.runs[q].dir)) == 0)
                        repeat_add(&rep[j], &sst[q]);
            if (sst)
                analysis_free(sst, sub.n);
            runset_free(&sub);
            free(dir);
            if (rc < 0)
                return error_wrap("repeat %d", k);
        }
    }
    return 0;
}
