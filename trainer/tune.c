/* tune.c — `ddpprof tune`: candidate changes measured in interleaved A/B trials (tune.h). */
#include "tune.h"

#include "cli.h"
#include "common/error.h"
#include "common/printable.h"
#include "device.h"
#include "probes/runlog.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define TUNE_MAX_CANDIDATES 16
#define TUNE_MAX_WORDS 16
#define TUNE_WARMUP_STEPS 5 /* each trial's first steps, left out as the report's warm-up */

/* One configuration tried: the given one with args added (and env set for it). */
struct candidate {
    char name[64];
    char *words[TUNE_MAX_WORDS]; /* option words added to the command line */
    int nwords;
    char *env[TUNE_MAX_WORDS]; /* NAME=VALUE set in the trial's environment */
    int nenv;
    double step_ms[100];       /* per round: the trial's median steady-state step */
    double ratio[100];         /* per round: step_ms / the given configuration's */
};

/* The faster candidates that set nothing in common (candidates_clash), best first, as one
 * configuration: measured in rounds of its own against the best single one and the given
 * configuration (combination_rounds). */
struct combination {
    struct candidate k;               /* "best+second": the parts' environment and words */
    int part[TUNE_MAX_CANDIDATES + 1]; /* the candidates in it, best first */
    int npart;
    double given_ms[100], best_ms[100]; /* per round: the given configuration's step, the best
                                           single candidate's */
};

struct tune {
    const struct cli *c;
    int default_candidates; /* made by candidates_default (the comm ones pruned after round 1's
                               first trial) */
    char self[PATH_MAX];
    char out[4096];
    char **argv; /* {self, "train", the command line as given less tune's own options and
                    --out, NULL} (cli_child_argv) */
    char **args; /* argv + 2: the user's words */
    int nargs;
    int steps;   /* measured steps a trial */
    int rounds;
    struct candidate cand[TUNE_MAX_CANDIDATES + 1]; /* [0]: the given configuration */
    int ncand;
    double noise; /* the largest |ratio - 1| of "same" over the rounds */
    struct combination combo;
};

static int add_word(char **list, int *n, const char *w)
{
    if (*n >= TUNE_MAX_WORDS)
        return error_set("tune: a candidate of more than %d words", TUNE_MAX_WORDS);
    if (!(list[*n] = strdup(w)))
        return error_set("tune: out of memory");
    (*n)++;
    return 0;
}

static void candidate_free(struct candidate *k)
{
    for (int i = 0; i < k->nwords; i++)
        free(k->words[i]);
    for (int i = 0; i < k->nenv; i++)
        free(k->env[i]);
    k->nwords = k->nenv = 0;
}

/* name, then words into *k: a word NAME=VALUE whose NAME is upper case is the environment */
static int candidate_parse(struct candidate *k, const char *name, const char *args)
{
    memset(k, 0, sizeof *k);
    snprintf(k->name, sizeof k->name, "%s", name);
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", args);
    for (char *save = NULL, *w = strtok_r(buf, " \t", &save); w; w = strtok_r(NULL, " \t", &save)) {
        const char *eq = strchr(w, '=');
        int env = eq && eq > w && w[0] >= 'A' && w[0] <= 'Z';
        for (const char *p = w; env && p < eq; p++)
            env = (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '_';
        if (env ? add_word(k->env, &k->nenv, w) : add_word(k->words, &k->nwords, w))
            return candidate_free(k), -1;
    }
    return 0;
}

static int candidate_add(struct tune *t, const char *name, const char *args)
{
    if (t->ncand > TUNE_MAX_CANDIDATES)
        return error_set("tune: more than %d candidates", TUNE_MAX_CANDIDATES);
    if (candidate_parse(&t->cand[t->ncand], name, args))
        return -1;
    t->ncand++;
    return 0;
}

/* ------------------------------------------------------------------ compatible changes */

/* 1 when environment words a and b (NAME=VALUE) set one variable */
static int env_same(const char *a, const char *b)
{
    const size_t n = strcspn(a, "=");
    return n == strcspn(b, "=") && strncmp(a, b, n) == 0;
}

/* 1 when option words a[i] and b[j] set one thing: the same field of train's options
 * (cli_option_field: --batch-size and -b are one), or, for a word that is no option of
 * train's, the same word */
static int word_same(const char *a, long fa, const char *b, long fb)
{
    return fa >= 0 || fb >= 0 ? fa == fb : strcmp(a, b) == 0;
}

/* Two candidates clash when they set something in common: an option whose field the other's
 * options set too (whatever the values), or an environment variable both set.  Candidates
 * that do not clash are compatible: the combination applies each as it was measured.  A
 * value word (the word after an option that takes one) is no setting of its own. */
static int candidates_clash(const struct candidate *a, const struct candidate *b)
{
    for (int i = 0; i < a->nwords; i++) {
        int va = 0;
        const long fa = cli_option_field(a->words[i], &va);
        for (int j = 0; j < b->nwords; j++) {
            int vb = 0;
            const long fb = cli_option_field(b->words[j], &vb);
            if (word_same(a->words[i], fa, b->words[j], fb))
                return 1;
            j += vb;
        }
        i += va;
    }
    for (int i = 0; i < a->nenv; i++)
        for (int j = 0; j < b->nenv; j++)
            if (env_same(a->env[i], b->env[j]))
                return 1;
    return 0;
}

int tune_compatible(const char *a, const char *b)
{
    struct candidate *x = calloc(2, sizeof *x);
    if (!x)
        return error_set("tune: out of memory");
    int rc = candidate_parse(&x[0], "a", a) || candidate_parse(&x[1], "b", b)
                 ? -1
                 : !candidates_clash(&x[0], &x[1]);
    candidate_free(&x[0]);
    candidate_free(&x[1]);
    free(x);
    return rc;
}

/* --candidates "NAME=ARGS;NAME=ARGS" */
static int candidates_given(struct tune *t, const char *list)
{
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", list);
    for (char *save = NULL, *item = strtok_r(buf, ";", &save); item;
         item = strtok_r(NULL, ";", &save)) {
        while (*item == ' ')
            item++;
        char *eq = strchr(item, '=');
        if (!eq || eq == item)
            return error_set("--candidates: '%s' is not NAME=ARGS (e.g. \"cap=--bucket-cap-mb "
                             "1;nosync=--no-sync-bn\")",
                             item);
        *eq = '\0';
        if (strcmp(item, "same") == 0)
            return error_set("--candidates: 'same' is the given configuration against itself, "
                             "which tune always runs: name yours otherwise");
        if (candidate_add(t, item, eq + 1))
            return -1;
    }
    return t->ncand > 2 ? 0 : error_set("--candidates names none");
}

/* the changes the advice ranks, as they apply to this configuration (docs/USAGE.md "ddpprof
 * tune") */
static int candidates_default(struct tune *t)
{
    const struct train_opts *o = &t->c->train;
    const int world = cli_world(t->c);
    char a[128];
    int rc = 0;
    if (world > 1) {
        if (o->ddp.bucket_cap_mb < 1000)
            rc |= candidate_add(t, "one-bucket", "--bucket-cap-mb 1000");
        if (o->ddp.bucket_cap_mb >= 0.02) {
            snprintf(a, sizeof a, "--bucket-cap-mb %g", o->ddp.bucket_cap_mb / 16);
            rc |= candidate_add(t, "smaller-buckets", a);
        }
        if (o->ddp.sync_bn)
            rc |= candidate_add(t, "no-sync-bn", "--no-sync-bn");
    }
    rc |= candidate_add(t, o->amp.dtype == AMP_OFF ? "amp-fp16" : "amp-off",
                        o->amp.dtype == AMP_OFF ? "--amp fp16" : "--amp off");
    if (world > 1 && o->dev.ngpus == 0) { /* CPU ranks: the other host comm */
        const char *now = device_comm_name(o->dev.comm);
        for (int i = 1; device_comm_name(i); i++) {
            const char *n = device_comm_name(i);
            char avail[64];
            device_comms(avail, sizeof avail);
            if (strcmp(n, now) == 0 || !strstr(avail, n) || strcmp(n, "nccl") == 0)
                continue;
            snprintf(a, sizeof a, "--comm %s", n);
            char name[64];
            snprintf(name, sizeof name, "comm-%s", n);
            rc |= candidate_add(t, name, a);
        }
    }
    return rc ? -1 : 0;
}

/* ------------------------------------------------------------------ a trial */

/* split one CSV line into fields (RFC 4180 quotes), in place; the count */
static int csv_split(char *line, char **f, int cap)
{
    int n = 0;
    char *p = line;
    while (n < cap) {
        char *w = p, *o = p;
        if (*p == '"') {
            p++;
            for (;;) {
                if (*p == '"' && p[1] == '"') {
                    *o++ = '"';
                    p += 2;
                } else if (*p == '"' || !*p) {
                    if (*p)
                        p++;
                    break;
                } else
                    *o++ = *p++;
            }
            while (*p && *p != ',')
                p++;
        } else {
            while (*p && *p != ',' && *p != '\n' && *p != '\r')
                p++;
            o = p;
        }
        int end = !*p || *p == '\n' || *p == '\r';
        *o = '\0';
        f[n++] = w;
        if (end)
            break;
        p++;
    }
    return n;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* the median host-clock step (ms) of rank 0's trace in dir after the warm-up steps, or NAN
 * (error_set) */
static double trial_step_ms(const char *dir)
{
    char path[4400], line[8192];
    snprintf(path, sizeof path, "%s/rank0.trace.csv", dir);
    FILE *f = fopen(path, "r");
    if (!f)
        return error_set("tune: %s: %s", path, strerror(errno)), NAN;
    int c_step = -1, c_phase = -1, c_clock = -1, c_start = -1, c_end = -1, n = 0;
    double *ms = NULL;
    size_t cap = 0;
    char *fld[32];
    if (fgets(line, sizeof line, f)) {
        int nf = csv_split(line, fld, 32);
        for (int i = 0; i < nf; i++) {
            c_step = strcmp(fld[i], "step") == 0 ? i : c_step;
            c_phase = strcmp(fld[i], "phase") == 0 ? i : c_phase;
            c_clock = strcmp(fld[i], "clock") == 0 ? i : c_clock;
            c_start = strcmp(fld[i], "start_ns") == 0 ? i : c_start;
            c_end = strcmp(fld[i], "end_ns") == 0 ? i : c_end;
        }
    }
    int bad = c_step < 0 || c_phase < 0 || c_clock < 0 || c_start < 0 || c_end < 0;
    while (!bad && fgets(line, sizeof line, f)) {
        int nf = csv_split(line, fld, 32);
        if (nf <= c_end || strcmp(fld[c_phase], "step") != 0 || strcmp(fld[c_clock], "host") != 0 ||
            atol(fld[c_step]) <= TUNE_WARMUP_STEPS)
            continue;
        if ((size_t)n == cap) {
            double *m = realloc(ms, (cap = cap ? 2 * cap : 256) * sizeof *ms);
            if (!m) {
                bad = 1;
                break;
            }
            ms = m;
        }
        ms[n++] = 1e-6 * (double)(strtoll(fld[c_end], NULL, 10) - strtoll(fld[c_start], NULL, 10));
    }
    fclose(f);
    double v = NAN;
    if (bad)
        error_set("tune: %s is no trace of ddpprof's (no step, phase, clock, start_ns, end_ns "
                  "columns)", path);
    else if (n == 0)
        error_set("tune: %s has no step after the first %d", path, TUNE_WARMUP_STEPS);
    else
        v = median(ms, n);
    free(ms);
    return v;
}

/* run the trial of candidate cd in the round named round ("round-2"), in OUT/ROUND/NAME/;
 * its median step (ms) or NAN (error_set) */
static double trial_run(struct tune *t, const struct candidate *cd, const char *round)
{
    const struct train_opts *o = &t->c->train;
    char dir[4200], limit[32], test_limit[32];
    snprintf(dir, sizeof dir, "%s/%s/%s", t->out, round, cd->name);
    const long world = cli_world(t->c);
    snprintf(limit, sizeof limit, "%ld",
             (long)(TUNE_WARMUP_STEPS + t->steps) * o->data.batch_size * world);
    snprintf(test_limit, sizeof test_limit, "%d", o->data.batch_size);
    char *argv[512];
    int n = 0;
    argv[n++] = t->self;
    argv[n++] = "train";
    for (int i = 0; i < t->nargs && n < 480; i++)
        argv[n++] = t->args[i];
    for (int i = 0; i < cd->nwords && n < 500; i++)
        argv[n++] = cd->words[i];
    const char *tail[] = {"--epochs", "1", "--limit", limit, "--test-limit", test_limit,
                          "--quiet", "--out", dir};
    for (size_t i = 0; i < sizeof tail / sizeof tail[0]; i++)
        argv[n++] = (char *)tail[i];
    argv[n] = NULL;
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0)
        return error_set("tune: fork: %s", strerror(errno)), NAN;
    if (pid == 0) {
        for (int i = 0; i < cd->nenv; i++)
            putenv(cd->env[i]);
        execv(t->self, argv);
        fprintf(stderr, "ddpprof: tune: cannot execute %s\n", t->self);
        _exit(127);
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            return error_set("tune: waiting for trial %s: %s", cd->name, strerror(errno)), NAN;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        return error_set("tune: the trial '%s' of %s failed (%s %d); its run directory: %s",
                         cd->name, round, WIFEXITED(status) ? "exit status" : "signal",
                         WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status), dir),
               NAN;
    return trial_step_ms(dir);
}

/* meta.csv's value of key k (probes/run_format.h) in dir into buf (empty when absent) */
static void trial_meta(const char *dir, enum run_meta_key k, char *buf, size_t cap)
{
    char path[4400], line[1024];
    snprintf(path, sizeof path, "%s/meta.csv", dir);
    buf[0] = '\0';
    FILE *f = fopen(path, "r");
    const char *key = run_meta_key_name(k);
    const size_t n = strlen(key);
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, key, n) == 0 && line[n] == ',') {
            size_t len = strcspn(line + n + 1, "\r\n");
            len = len < cap ? len : cap - 1;
            memcpy(buf, line + n + 1, len);
            buf[len] = '\0';
        }
    if (f)
        fclose(f);
}

/* The default comm candidates name each other comm; --comm auto resolves to one of them,
 * which the given configuration's first trial says (meta.csv comm): that candidate is the
 * given configuration again, and goes. */
static void prune_auto_comm(struct tune *t)
{
    char dir[4200], comm[64], name[80];
    snprintf(dir, sizeof dir, "%s/round-1/%s", t->out, t->cand[0].name);
    trial_meta(dir, RUN_META_comm, comm, sizeof comm);
    snprintf(name, sizeof name, "comm-%s", comm);
    for (int k = 2; comm[0] && k < t->ncand; k++)
        if (strcmp(t->cand[k].name, name) == 0) {
            for (int i = 0; i < t->cand[k].nwords; i++)
                free(t->cand[k].words[i]);
            memmove(&t->cand[k], &t->cand[k + 1], sizeof t->cand[0] * (size_t)(t->ncand - k - 1));
            t->ncand--;
            printf("ddpprof tune: --comm auto is %s here: no candidate for it\n", comm);
            break;
        }
}

/* ------------------------------------------------------------------ the verdicts */

struct verdict {
    double base_ms, ms, change, lo, hi; /* medians (ms); change and its range (fraction) */
    const char *word;                   /* "faster", "slower", "noise" */
};

/* The given configuration against itself moves by up to `noise` (the "same" trial's largest
 * |ratio - 1| over the rounds): a change is real when every round agrees on its direction
 * and its median is beyond that.  ms against base_ms, round by round (n rounds). */
static struct verdict judge_steps(const double *ms, const double *base_ms, int n, double noise)
{
    double r[100], b[100], s[100];
    for (int i = 0; i < n; i++) {
        r[i] = ms[i] / base_ms[i];
        b[i] = base_ms[i];
        s[i] = ms[i];
    }
    struct verdict v = {.base_ms = median(b, n), .ms = median(s, n)};
    double m = median(r, n); /* sorts r */
    v.change = m - 1.0;
    v.lo = r[0] - 1.0;
    v.hi = r[n - 1] - 1.0;
    v.word = v.hi < 0 && -v.change > noise ? "faster" : v.lo > 0 && v.change > noise ? "slower"
                                                                                     : "noise";
    return v;
}

/* the command line of the given configuration with k's change (k NULL: none), as the user
 * would type it: k's environment first, tune's --out left out */
static void print_command(FILE *out, const struct tune *t, const struct candidate *k)
{
    char shown[1024];
    for (int i = 0; k && i < k->nenv; i++) {
        text_printable(k->env[i], (size_t)-1, shown, sizeof shown);
        fprintf(out, "%s ", shown);
    }
    fputs("ddpprof", out);
    for (int i = 0; i < t->nargs; i++) {
        text_printable(t->args[i], (size_t)-1, shown, sizeof shown);
        fprintf(out, " %s", shown);
    }
    for (int i = 0; k && i < k->nwords; i++) {
        text_printable(k->words[i], (size_t)-1, shown, sizeof shown);
        fprintf(out, " %s", shown);
    }
    fputc('\n', out);
}

/* candidate k's args as tune.csv writes them: environment words, then option words */
static void candidate_args(const struct candidate *k, char *args, size_t cap)
{
    args[0] = '\0';
    for (int i = 0; i < k->nenv; i++)
        snprintf(args + strlen(args), cap - strlen(args), "%s%s", *args ? " " : "", k->env[i]);
    for (int i = 0; i < k->nwords; i++)
        snprintf(args + strlen(args), cap - strlen(args), "%s%s", *args ? " " : "", k->words[i]);
}

/* k's row of tune.csv and of the table printed */
static void report_row(FILE *f, const struct tune *t, const struct candidate *k,
                       const struct verdict *v)
{
    char args[512], shown[64];
    candidate_args(k, args, sizeof args);
    csv_field_write(f, k->name);
    fputc(',', f);
    csv_field_write(f, args);
    fprintf(f, ",%d,%.3f,%.3f,%.2f,%.2f,%.2f,%.2f,%s\n", t->rounds, v->base_ms, v->ms,
            100 * v->change, 100 * v->lo, 100 * v->hi, 100 * t->noise, v->word);
    text_printable(k->name, (size_t)-1, shown, sizeof shown);
    printf("   %-18s %12.3f %12.3f %+8.1f%% [%+6.1f%%, %+6.1f%%]  %s\n", shown, v->base_ms,
           v->ms, 100 * v->change, 100 * v->lo, 100 * v->hi, v->word);
}

/* tune.csv and the table of the rounds: each candidate's verdict into v[k]; the best
 * faster candidate's index, 0 when none is faster, or -1 (error_set) */
static int tune_table(struct tune *t, struct verdict *v)
{
    t->noise = 0.0;
    for (int i = 0; i < t->rounds; i++)
        t->noise = fmax(t->noise, fabs(t->cand[1].ratio[i] - 1.0));
    char path[4200];
    snprintf(path, sizeof path, "%s/tune.csv", t->out);
    FILE *f = fopen(path, "w");
    if (!f)
        return error_set("tune: cannot write %s: %s", path, strerror(errno));
    fprintf(f, "candidate,args,rounds,step_ms_given,step_ms,change_pct,low_pct,high_pct,"
               "noise_pct,verdict\n");
    printf("\n# tune: %d rounds of %d steps (after %d warm-up), interleaved; the given "
           "configuration against itself moved up to %.1f %%\n",
           t->rounds, t->steps, TUNE_WARMUP_STEPS, 100 * t->noise);
    printf("#  %-18s %12s %12s %9s %19s  %s\n", "candidate", "given (ms)", "with it (ms)",
           "change", "range (rounds)", "verdict");
    int best = 0;
    for (int k = 1; k < t->ncand; k++) {
        v[k] = judge_steps(t->cand[k].step_ms, t->cand[0].step_ms, t->rounds, t->noise);
        report_row(f, t, &t->cand[k], &v[k]);
        if (strcmp(v[k].word, "faster") == 0 && (best == 0 || v[k].change < v[best].change))
            best = k;
    }
    if (fclose(f))
        return error_set("tune: writing %s: %s", path, strerror(errno));
    return best;
}

/* k's environment and words added to the combination's; 0, or -1 when they do not fit */
static int combination_add(struct combination *c, const struct candidate *k)
{
    if (c->k.nwords + k->nwords > TUNE_MAX_WORDS || c->k.nenv + k->nenv > TUNE_MAX_WORDS)
        return -1;
    for (int i = 0; i < k->nwords; i++)
        if (add_word(c->k.words, &c->k.nwords, k->words[i]))
            return -1;
    for (int i = 0; i < k->nenv; i++)
        if (add_word(c->k.env, &c->k.nenv, k->env[i]))
            return -1;
    const size_t n = strlen(c->k.name);
    snprintf(c->k.name + n, sizeof c->k.name - n, "%s%s", n ? "+" : "", k->name);
    return 0;
}

/* The combination of the candidates that lean faster -- `faster`, or `noise` with a median
 * change below 0: changes each inside the noise can add up to one beyond it, which an
 * exhaustive grid finds (scripts/tune-check: three such, -1.6 to -1.9 % each, together
 * -5.7 %) --, greedily, best first: each joins when it clashes with none already in
 * (candidates_clash); the others are said.  Its parts' count (t->combo), 2 or more when
 * there is one to measure. */
static int combination_make(struct tune *t, const struct verdict *v)
{
    struct combination *c = &t->combo;
    int order[TUNE_MAX_CANDIDATES + 1], n = 0;
    for (int k = 2; k < t->ncand; k++) /* [1] is "same" */
        if (strcmp(v[k].word, "faster") == 0 ||
            (strcmp(v[k].word, "noise") == 0 && v[k].change < 0)) {
            int i = n++;
            for (; i > 0 && v[order[i - 1]].change > v[k].change; i--)
                order[i] = order[i - 1];
            order[i] = k;
        }
    for (int i = 0; i < n; i++) {
        const struct candidate *k = &t->cand[order[i]];
        int with = -1;
        for (int j = 0; j < c->npart && with < 0; j++)
            with = candidates_clash(k, &t->cand[c->part[j]]) ? c->part[j] : -1;
        if (with < 0 && combination_add(c, k) == 0)
            c->part[c->npart++] = order[i];
        else if (with >= 0)
            printf("# not combined: %s sets what %s sets\n", k->name, t->cand[with].name);
        else
            printf("# not combined: %s (more than %d words together)\n", k->name,
                   TUNE_MAX_WORDS);
    }
    return c->npart;
}

/* The combination against the best single candidate and the given configuration: rounds
 * of their own (as many as tune's), the order rotated a round, in OUT/combo-round-N/.
 * 0 or -1 (error_set). */
static int combination_rounds(struct tune *t, int best)
{
    struct combination *c = &t->combo;
    const struct candidate *who[3] = {&t->cand[0], &t->cand[best], &c->k};
    char shown[64], args[512];
    text_printable(c->k.name, (size_t)-1, shown, sizeof shown);
    candidate_args(&c->k, args, sizeof args);
    printf("\nddpprof tune: %d candidates that lean faster set nothing in common: %s (%s), "
           "%d rounds against %s and the given configuration\n",
           c->npart, shown, args, t->rounds, t->cand[best].name);
    for (int r = 0; r < t->rounds; r++) {
        char round[32];
        double ms[3];
        snprintf(round, sizeof round, "combo-round-%d", r + 1);
        for (int j = 0; j < 3; j++) {
            const int i = (j + r) % 3;
            if (isnan(ms[i] = trial_run(t, who[i], round)))
                return -1;
        }
        c->given_ms[r] = ms[0];
        c->best_ms[r] = ms[1];
        c->k.step_ms[r] = ms[2];
        c->k.ratio[r] = ms[2] / ms[0];
        printf("ddpprof tune: combination round %d of %d done (the given configuration: %.3f "
               "ms a step, %s %.3f, %s %.3f)\n",
               r + 1, t->rounds, ms[0], t->cand[best].name, ms[1], shown, ms[2]);
        fflush(stdout);
    }
    return 0;
}

/* The combination's row of tune.csv (against the given configuration of its rounds) and
 * its verdict against the best single candidate: 1 when it is faster than that beyond the
 * noise (the pick), 0 when not, -1 (error_set).  *vg: the row's verdict. */
static int combination_judge(struct tune *t, int best, struct verdict *vg)
{
    struct combination *c = &t->combo;
    char path[4200];
    snprintf(path, sizeof path, "%s/tune.csv", t->out);
    FILE *f = fopen(path, "a");
    if (!f)
        return error_set("tune: cannot write %s: %s", path, strerror(errno));
    *vg = judge_steps(c->k.step_ms, c->given_ms, t->rounds, t->noise);
    printf("#  %-18s %12s %12s %9s %19s  %s\n", "combination", "given (ms)", "with it (ms)",
           "change", "range (rounds)", "verdict");
    report_row(f, t, &c->k, vg);
    if (fclose(f))
        return error_set("tune: writing %s: %s", path, strerror(errno));
    const struct verdict vb = judge_steps(c->k.step_ms, c->best_ms, t->rounds, t->noise);
    printf("#  against %s alone: %.3f -> %.3f ms, %+.1f %% [%+.1f %%, %+.1f %%]: %s\n",
           t->cand[best].name, vb.base_ms, vb.ms, 100 * vb.change, 100 * vb.lo, 100 * vb.hi,
           vb.word);
    return strcmp(vb.word, "faster") == 0;
}

static int tune_report(struct tune *t)
{
    struct verdict v[TUNE_MAX_CANDIDATES + 1], vc;
    const int best = tune_table(t, v);
    if (best < 0)
        return -1;
    /* the combination is measured against the best faster candidate, or where none is
     * faster its own leading part; it is the pick when it is faster than that one beyond
     * the noise, and where no single candidate was, faster than the given configuration */
    int pick_combo = 0;
    if (combination_make(t, v) >= 2) {
        const int against = best > 0 ? best : t->combo.part[0];
        if (combination_rounds(t, against) ||
            (pick_combo = combination_judge(t, against, &vc)) < 0)
            return -1;
        if (best <= 0)
            pick_combo = strcmp(vc.word, "faster") == 0;
    }
    if (pick_combo) {
        printf("# best measured: %s, %.1f %% faster a step (than the given configuration in "
               "its rounds%s%s%s):\n",
               t->combo.k.name, -100 * vc.change, best > 0 ? "; faster than " : "",
               best > 0 ? t->cand[best].name : "", best > 0 ? " alone beyond the noise" : "");
        print_command(stdout, t, &t->combo.k);
    } else if (best > 0) {
        printf("# best measured: %s, %.1f %% faster a step%s:\n", t->cand[best].name,
               -100 * v[best].change,
               t->combo.npart >= 2 ? " (the combination was not faster than it beyond the "
                                     "noise)"
                                   : "");
        print_command(stdout, t, &t->cand[best]);
    } else {
        printf("# best measured: the configuration as given (no candidate was faster beyond "
               "the noise%s):\n",
               t->combo.npart >= 2 ? ", nor the combination of those leaning faster" : "");
        print_command(stdout, t, NULL);
    }
    printf("# tune in %s: tune.csv, round-N/CANDIDATE/ (each trial's run)%s, report/ (the "
           "advice below)\n", t->out, t->combo.npart >= 2 ? ", combo-round-N/" : "");
    return 0;
}

/* The advice on the given configuration with what the trials measured: `ddpprof report
 * ROUND/given --tune tune.csv` of the last round's given trial into OUT/report/ (its
 * output in OUT/report/report.txt), and its last lines -- the verdict and the
 * recommendations, each measured (A/B) change marked so -- printed (report/FORMULAS.md
 * "Advice").  A report that fails is said on stderr; tune's measurements stand. */
static void tune_advice(struct tune *t)
{
    char run[4300], csv[4300], out[4300], txt[4400], warm[16], line[8192];
    snprintf(run, sizeof run, "%s/round-%d/given", t->out, t->rounds);
    snprintf(csv, sizeof csv, "%s/tune.csv", t->out);
    snprintf(out, sizeof out, "%s/report", t->out);
    snprintf(txt, sizeof txt, "%s/report.txt", out);
    snprintf(warm, sizeof warm, "%d", TUNE_WARMUP_STEPS);
    if (mkdir(out, 0777) != 0 && errno != EEXIST) {
        fprintf(stderr, "ddpprof tune: no advice: cannot make %s (%s)\n", out, strerror(errno));
        return;
    }
    char *argv[] = {t->self, "report", run, "--tune", csv, "--warmup-steps", warm, "--out", out,
                    NULL};
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        int fd = open(txt, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
        if (fd < 0 || dup2(fd, STDOUT_FILENO) < 0 || dup2(fd, STDERR_FILENO) < 0)
            _exit(127);
        execv(t->self, argv);
        _exit(127);
    }
    int status = 0;
    while (pid > 0 && waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    if (pid < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "ddpprof tune: no advice: the report of %s failed; its output: %s\n",
                run, txt);
        return;
    }
    FILE *f = fopen(txt, "r");
    long from = -1;
    while (f && fgets(line, sizeof line, f)) /* the last verdict: the advice's first line */
        if (strncmp(line, "# verdict: ", 11) == 0)
            from = ftell(f) - (long)strlen(line);
    if (f && from >= 0 && fseek(f, from, SEEK_SET) == 0) {
        printf("#\n# the advice on the given configuration with what tune measured (ddpprof "
               "report %s --tune %s; advice.csv and the tables in %s):\n", run, csv, out);
        while (fgets(line, sizeof line, f))
            fputs(line, stdout);
    } else {
        fprintf(stderr, "ddpprof tune: no advice in %s\n", txt);
    }
    if (f)
        fclose(f);
}

/* ------------------------------------------------------------------ main */

static int tune_setup(struct tune *t, int argc, char **argv)
{
    if (readlink("/proc/self/exe", t->self, sizeof t->self - 1) <= 0)
        return error_set("tune: cannot find this program's path in /proc/self/exe");
    /* each trial's `train` gets the user's words, then the candidate's and the trial's own
     * (later ones win: cli.h) */
    static const char *const own[] = {"--out", NULL};
    if (!(t->argv = cli_child_argv(CLI_TUNE, argc, argv, 2, CLI_TRAIN, own, NULL, t->self)))
        return -1;
    t->args = t->argv + 2;
    while (t->args[t->nargs])
        t->nargs++;
    t->rounds = t->c->tune_rounds;
    t->steps = t->c->tune_steps;
    if (candidate_add(t, "given", "") || candidate_add(t, "same", ""))
        return -1;
    t->default_candidates = !t->c->tune_candidates;
    if (t->c->tune_candidates ? candidates_given(t, t->c->tune_candidates)
                              : candidates_default(t))
        return -1;
    const char *dir = t->c->train.run.out_dir;
    if (!dir) {
        char base[256], stamp[32];
        time_t now = time(NULL);
        struct tm tm;
        localtime_r(&now, &tm);
        strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &tm);
        snprintf(base, sizeof base, "results/tune-%s", stamp);
        if (runlog_fresh_dir(t->out, sizeof t->out, base))
            return -1;
    } else
        snprintf(t->out, sizeof t->out, "%s", dir);
    return runlog_claim(t->out, 0) < 0 ? -1 : 0;
}

int tune_main(int argc, char **argv)
{
    struct cli c;
    if (cli_parse(&c, CLI_TUNE, argc, argv, 2))
        return -1;
    if (c.help) {
        cli_usage(stdout);
        return 0;
    }
    if (train_check_inputs(&c.train))
        return -1;
    struct tune *t = calloc(1, sizeof *t);
    if (!t)
        return error_set("tune: out of memory");
    t->c = &c;
    int rc = tune_setup(t, argc, argv);
    char shown[4300];
    text_printable(t->out, (size_t)-1, shown, sizeof shown);
    if (rc == 0)
        printf("ddpprof tune: %d candidate%s against the given configuration, %d rounds -> %s\n",
               t->ncand - 2, t->ncand == 3 ? "" : "s", t->rounds, shown);
    for (int r = 0; rc == 0 && r < t->rounds; r++) {
        /* the given configuration and every trial once, the order rotated a round */
        double step[TUNE_MAX_CANDIDATES + 1];
        char round[32];
        snprintf(round, sizeof round, "round-%d", r + 1);
        for (int j = 0; rc == 0 && j < t->ncand; j++) {
            int k = (j + r) % t->ncand;
            step[k] = trial_run(t, &t->cand[k], round);
            if (isnan(step[k]))
                rc = -1;
            else if (r == 0 && k == 0 && t->default_candidates && !t->c->train.dev.comm)
                prune_auto_comm(t); /* round 1 runs the given configuration first */
        }
        for (int k = 0; rc == 0 && k < t->ncand; k++) {
            t->cand[k].step_ms[r] = step[k];
            t->cand[k].ratio[r] = step[k] / step[0];
        }
        if (rc == 0)
            printf("ddpprof tune: round %d of %d done (the given configuration: %.3f ms a "
                   "step)\n", r + 1, t->rounds, step[0]);
        fflush(stdout);
    }
    if (rc == 0)
        rc = tune_report(t);
    if (rc == 0)
        tune_advice(t);
    for (int k = 0; k < t->ncand; k++)
        candidate_free(&t->cand[k]);
    candidate_free(&t->combo.k);
    cli_argv_free(t->argv);
    free(t);
    return rc;
}
