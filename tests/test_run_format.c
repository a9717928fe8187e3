/* test_run_format.c — meta.csv's format (probes/run_format.h), the one table its writer and
 * its reader expand:
 *
 *   test_run_format                  the tables hold together: every key once, every indexed
 *                                    key spelled for an index reads back as that key and
 *                                    index, and what is no key of the format is none
 *   test_run_format --doc TRACE.md   probes/TRACE.md's table of meta.csv is the one the
 *                                    tables print (test_run_format_doc)
 *   test_run_format --markdown       print that table (paste it between TRACE.md's markers)
 *   test_run_format --check DIR      DIR/meta.csv, as a run writes it: every key is one of
 *                                    the format's, and every key the format says this run
 *                                    writes is there (tests/test_run_format_run.sh)
 * Exit 0 when everything holds. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "probes/run_format.h"
#include "testutil.h"

#define DOC_BEGIN "<!-- meta.csv keys: made from probes/run_format.h"
#define DOC_END "<!-- end of the keys made from probes/run_format.h -->"

static const char *when_words(enum run_meta_when w)
{
    static const char *const words[] = {"every run", "DDP runs", "CPU runs", "GPU runs",
                                        "`--trace full`", "when it applies",
                                        "earlier versions only"};
    return words[w];
}

/* a table cell: | would end the cell */
static void cell(FILE *f, const char *s)
{
    for (; *s; s++)
        fputs(*s == '|' ? "\\|" : (char[2]){*s, 0}, f);
}

static void doc_row(FILE *f, const char *key, const struct run_meta_spec *s)
{
    fprintf(f, "| `%s` | %s | %s | %s | ", key, run_meta_type_name(s->type), s->unit,
            when_words(s->when));
    cell(f, s->doc);
    fputs(" |\n", f);
}

/* The keys' section of probes/TRACE.md, markers included. */
static void doc_write(FILE *f)
{
    fputs(DOC_BEGIN " by `build/tests/test_run_format --markdown`; test_run_format_doc "
                    "checks it -->\n",
          f);
    fputs("| key | type | unit | written by | meaning |\n|---|---|---|---|---|\n", f);
    for (int k = RUN_META_NONE + 1; k < RUN_META_KEY_END; k++)
        doc_row(f, run_meta_keys()[k].key, &run_meta_keys()[k]);
    fputs("\nIndexed keys, one per item of a group:\n\n| group | index |\n|---|---|\n", f);
    for (int g = 0; g < RUN_META_GROUP_COUNT; g++) {
        const struct run_meta_group_spec *gs = &run_meta_groups()[g];
        fprintf(f, "| `%s` | ", gs->shape == RUN_META_RANKED ? "LEAF.rankN" : gs->name);
        cell(f, gs->doc);
        fputs(" |\n", f);
    }
    fputs("\n| key | type | unit | written by | meaning |\n|---|---|---|---|---|\n", f);
    for (int k = 0; k < RUN_META_INDEXED_COUNT; k++) {
        const struct run_meta_spec *s = &run_meta_indexed_keys()[k];
        const struct run_meta_group_spec *g = &run_meta_groups()[s->group];
        char key[128];
        if (g->shape == RUN_META_RANKED)
            snprintf(key, sizeof key, "%s.rankN", s->key);
        else
            snprintf(key, sizeof key, "%s.%c.%s", g->name, g->doc[0], s->key);
        doc_row(f, key, s);
    }
    fputs(DOC_END "\n", f);
}

static int doc_check(const char *path)
{
    FILE *f = fopen(path, "r");
    CHECK(f != NULL, "%s: cannot read it", path);
    if (!f)
        return test_finish();
    char *text = NULL, *want = NULL;
    size_t tlen = 0, wlen = 0;
    FILE *t = open_memstream(&text, &tlen);
    for (int c; (c = fgetc(f)) != EOF;)
        fputc(c, t);
    fclose(f);
    fclose(t);
    FILE *w = open_memstream(&want, &wlen);
    doc_write(w);
    fclose(w);
    const char *b = strstr(text, DOC_BEGIN), *e = b ? strstr(b, DOC_END) : NULL;
    CHECK(b && e, "%s: no section between \"%s\" and \"%s\"", path, DOC_BEGIN, DOC_END);
    if (b && e) {
        const size_t have = (size_t)(e - b) + strlen(DOC_END) + 1;
        const int same = have == wlen && memcmp(b, want, wlen) == 0;
        CHECK(same, "%s: its meta.csv keys are not probes/run_format.h's: replace the section "
                    "with what `build/tests/test_run_format --markdown` prints",
              path);
        if (!same)
            fprintf(stderr, "--- the section as the tables make it:\n%s", want);
    }
    free(text);
    free(want);
    return test_finish();
}

/* the tables hold together */
static int unit(void)
{
    /* fixed keys: each once, each found by its name, none spelled like an indexed key */
    for (int k = RUN_META_NONE + 1; k < RUN_META_KEY_END; k++) {
        const char *name = run_meta_key_name(k);
        int index;
        CHECK(run_meta_key_of(name) == (enum run_meta_key)k, "fixed key %s is not found by "
              "its name (a second row of that name?)", name);
        CHECK(run_meta_indexed_of(name, &index) < 0, "fixed key %s reads as an indexed key",
              name);
        CHECK(run_meta_keys()[k].doc && *run_meta_keys()[k].doc, "%s has no meaning", name);
    }
    CHECK(run_meta_key_name(RUN_META_NONE) == NULL, "RUN_META_NONE has a name");
    CHECK(run_meta_key_of("no_such_key") == RUN_META_NONE, "an unknown key is found");
    /* indexed keys: spelled at several indexes, read back as that key and index */
    const int idx[] = {0, 1, 7, 10, 123, 999999999};
    for (int k = 0; k < RUN_META_INDEXED_COUNT; k++) {
        const struct run_meta_group_spec *g = &run_meta_groups()[run_meta_indexed_keys()[k].group];
        for (size_t i = 0; i < sizeof idx / sizeof *idx; i++) {
            char key[128];
            int got = -1;
            run_meta_key_at(key, sizeof key, (enum run_meta_indexed)k, idx[i]);
            const int found = run_meta_indexed_of(key, &got);
            if (idx[i] < g->first)
                CHECK(found < 0, "%s (below group %s's first index %d) reads as a key", key,
                      g->name, g->first);
            else
                CHECK(found == k && got == idx[i], "%s reads back as key %d index %d", key,
                      found, got);
            CHECK(run_meta_key_of(key) == RUN_META_NONE, "%s is also a fixed key", key);
        }
    }
    /* what is no key */
    static const char *const not_keys[] = {
        "bucket.01.bytes", "bucket.-1.bytes", "bucket.+1.bytes", "bucket.1.byte",
        "bucket..bytes",   "bucket.1",        "bucket.1.bytes.x", "epoch.0.train_s",
        "host.rank",       "host.rank01",     "host.rank-1",      "hostrank1",
        "layer.1234567890.name", "clock_offset_ns.rank1x", "x.bucket.1.bytes", ""};
    for (size_t i = 0; i < sizeof not_keys / sizeof *not_keys; i++) {
        int index;
        CHECK(run_meta_indexed_of(not_keys[i], &index) < 0 &&
                  run_meta_key_of(not_keys[i]) == RUN_META_NONE,
              "'%s' reads as a key", not_keys[i]);
    }
    char key[64];
    run_meta_key_at(key, sizeof key, RUN_META_rank_clock_offset_ns, 3);
    CHECK(strcmp(key, "clock_offset_ns.rank3") == 0, "the clock offset of rank 3 is %s", key);
    run_meta_key_at(key, sizeof key, RUN_META_bucket_bytes, 2);
    CHECK(strcmp(key, "bucket.2.bytes") == 0, "bucket 2's bytes are %s", key);
    return test_finish();
}

/* the value of fixed key k in m's rows, or NULL */
static const char *value_of(const struct test_csv *m, int kcol, int vcol, const char *key)
{
    const char *v = NULL;
    for (int r = 0; r < m->nrows; r++)
        if (m->nfields[r] > vcol && strcmp(m->row[r][kcol], key) == 0)
            v = m->row[r][vcol];
    return v;
}

static int has_key(const struct test_csv *m, int kcol, const char *key)
{
    for (int r = 0; r < m->nrows; r++)
        if (m->nfields[r] > kcol && strcmp(m->row[r][kcol], key) == 0)
            return 1;
    return 0;
}

/* whether a run of this mode, device and trace writes keys marked w */
static int written(enum run_meta_when w, int ddp, int gpu, int full)
{
    return w == RUN_META_ALL || (w == RUN_META_DDP && ddp) || (w == RUN_META_GPU && gpu) ||
           (w == RUN_META_CPU && !gpu) || (w == RUN_META_FULL && full);
}

static int count_of(const struct test_csv *m, int kcol, int vcol, const char *key)
{
    const char *v = value_of(m, kcol, vcol, key);
    return v ? atoi(v) : 0;
}

static int run_check(const char *dir)
{
    struct test_csv *m = test_csv_read(dir, "meta.csv");
    CHECK(m != NULL, "%s/meta.csv: cannot read it", dir);
    if (!m)
        return test_finish();
    const int kcol = test_csv_col(m, "key"), vcol = test_csv_col(m, "value");
    if (kcol < 0 || vcol < 0) {
        test_csv_free(m);
        return test_finish();
    }
    /* every key is the format's, OLD ones aside (no run writes them now) */
    for (int r = 0; r < m->nrows; r++) {
        const char *key = m->row[r][kcol];
        int index;
        const enum run_meta_key k = run_meta_key_of(key);
        CHECK(k != RUN_META_NONE || run_meta_indexed_of(key, &index) >= 0,
              "%s/meta.csv: '%s' is no key of probes/run_format.h", dir, key);
        CHECK(k == RUN_META_NONE || run_meta_keys()[k].when != RUN_META_OLD,
              "%s/meta.csv: '%s' is marked OLD (no run writes it) but this run did", dir, key);
    }
    const char *mode = value_of(m, kcol, vcol, "mode"), *device = value_of(m, kcol, vcol, "device"),
               *trace = value_of(m, kcol, vcol, "trace");
    const int ddp = mode && strcmp(mode, "ddp") == 0, gpu = device && strcmp(device, "cuda") == 0,
              full = trace && strcmp(trace, "full") == 0;
    /* every fixed key this run should have written */
    for (int k = RUN_META_NONE + 1; k < RUN_META_KEY_END; k++) {
        const struct run_meta_spec *s = &run_meta_keys()[k];
        if (written(s->when, ddp, gpu, full))
            CHECK(has_key(m, kcol, s->key), "%s/meta.csv: no %s (written by: %s)", dir, s->key,
                  when_words(s->when));
    }
    /* every indexed key, for each item of its group the run says it has */
    const int items[RUN_META_GROUP_COUNT] = {
        [RUN_META_GROUP_bucket] = count_of(m, kcol, vcol, "buckets"),
        [RUN_META_GROUP_layer] = count_of(m, kcol, vcol, "layers"),
        [RUN_META_GROUP_param] = -1, /* as many as the model's parameters: 1 at least */
        [RUN_META_GROUP_epoch] = count_of(m, kcol, vcol, "epochs"),
        [RUN_META_GROUP_restart] = count_of(m, kcol, vcol, "restarts"),
        [RUN_META_GROUP_rank] = count_of(m, kcol, vcol, "world_size")};
    for (int k = 0; k < RUN_META_INDEXED_COUNT; k++) {
        const struct run_meta_spec *s = &run_meta_indexed_keys()[k];
        const struct run_meta_group_spec *g = &run_meta_groups()[s->group];
        if (!written(s->when, ddp, gpu, full))
            continue;
        const int n = items[s->group] < 0 ? 1 : items[s->group];
        for (int i = g->first; i < g->first + n; i++) {
            char key[128];
            run_meta_key_at(key, sizeof key, (enum run_meta_indexed)k, i);
            CHECK(has_key(m, kcol, key), "%s/meta.csv: no %s (written by: %s)", dir, key,
                  when_words(s->when));
        }
    }
    test_csv_free(m);
    return test_finish();
}

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "--markdown") == 0) {
        doc_write(stdout);
        return 0;
    }
    if (argc == 3 && strcmp(argv[1], "--doc") == 0)
        return doc_check(argv[2]);
    if (argc == 3 && strcmp(argv[1], "--check") == 0)
        return run_check(argv[2]);
    if (argc != 1) {
        fprintf(stderr, "usage: test_run_format [--markdown | --doc TRACE.md | --check DIR]\n");
        return 2;
    }
    return unit();
}
