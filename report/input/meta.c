/* meta.c — meta.csv into struct run_meta (see meta.h): every row looked up in the run
 * format's tables (probes/run_format.h) and parsed by its type, once. */
#include "report/input/meta.h"

#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/parse.h"
#include "common/printable.h"
#include "report/input/warn.h"

/* warnings per meta.csv before the rest are counted in one line */
#define META_WARN_MAX 5

/* where each key's value lives in struct run_meta */
#define META_OFF_(key, type, unit, when, doc) offsetof(struct run_meta, key),
static const size_t meta_key_off[RUN_META_KEY_END] = {0, RUN_META_KEYS(META_OFF_)};
#undef META_OFF_
#define META_LOFF_(group, leaf, type, unit, when, doc) offsetof(struct run_meta, group##_##leaf),
static const size_t meta_list_off[RUN_META_INDEXED_COUNT] = {RUN_META_INDEXED(META_LOFF_)};
#undef META_LOFF_

static struct meta_value *meta_field(struct run_meta *m, enum run_meta_key k)
{
    return (struct meta_value *)((char *)m + meta_key_off[k]);
}

static struct meta_list *meta_list_of(struct run_meta *m, int k)
{
    return (struct meta_list *)((char *)m + meta_list_off[k]);
}

/* a value or key as the terminal shows it (common/printable.h), at most 40 bytes */
static const char *meta_shown(const char *v, int which)
{
    static _Thread_local char buf[2][TEXT_PRINTABLE_MAX];
    return text_printable(v, 40, buf[which], sizeof buf[which]);
}

int meta_int_of(const char *s, size_t len, int64_t *out)
{
    int64_t v;
    if (len - (len > 0 && s[0] == '-') > 19 || parse_i64(s, len, &v) < 0 || v == INT64_MIN)
        return -1;
    *out = v;
    return 0;
}

/* s parsed as type t into v (v->s untouched): 0, or -1 when s is not of that type.  INT:
 * common/parse.h's strict decimal; NUM: the whole of s as strtod reads it. */
static int meta_convert(const char *s, enum run_meta_type t, struct meta_value *v)
{
    if (t == RUN_META_INT) {
        int64_t i;
        if (meta_int_of(s, strlen(s), &i) < 0)
            return -1;
        v->i = i;
        v->d = (double)i;
    } else if (t == RUN_META_NUM) {
        char *end = NULL;
        if (!*s)
            return -1;
        double d = strtod(s, &end);
        if (*end)
            return -1;
        v->d = d;
    }
    return 0;
}

/* Store value into *v, parsed as t; -1 when it is not of type t (*v then absent) or after
 * error_set (out of memory, *v unchanged). */
static int meta_store(struct meta_value *v, enum run_meta_type t, const char *value, int *bad)
{
    struct meta_value nv = {0};
    *bad = meta_convert(value, t, &nv) < 0;
    if (*bad) {
        free((char *)v->s);
        *v = (struct meta_value){0};
        return 0;
    }
    char *s = strdup(value);
    if (!s)
        return error_set("report: out of memory reading meta.csv");
    nv.s = s;
    free((char *)v->s);
    *v = nv;
    return 0;
}

/* the fixed or indexed key whose bad value no report can go on without */
static int meta_fatal(int fixed, int k)
{
    return fixed ? k == RUN_META_world_size : k == RUN_META_rank_clock_offset_ns;
}

struct meta_warn {
    const char *file;
    int n; /* warnings so far */
};

static void meta_warn_one(struct meta_warn *w, long line, const char *what)
{
    if (w->n++ < META_WARN_MAX)
        report_warn("%s line %ld: %s: ignored", w->file, line, what);
}

static int meta_indexed_row(struct run_meta *m, const struct meta_row *r, size_t rows,
                            struct meta_warn *w)
{
    int index = 0, k = run_meta_indexed_of(r->key, &index);
    char what[256];
    if (k < 0) {
        snprintf(what, sizeof what, "unknown key '%s' (not in probes/run_format.h)",
                 meta_shown(r->key, 0));
        meta_warn_one(w, r->line, what);
        return 0;
    }
    if ((size_t)index >= rows + 1) { /* each index has its row */
        snprintf(what, sizeof what, "%s: index %d past the file's %zu rows",
                 meta_shown(r->key, 0), index, rows);
        meta_warn_one(w, r->line, what);
        return 0;
    }
    const struct run_meta_spec *spec = &run_meta_indexed_keys()[k];
    struct meta_list *l = meta_list_of(m, k);
    if (index >= l->n) {
        struct meta_value *v = realloc(l->v, (size_t)(index + 1) * sizeof *v);
        if (!v)
            return error_set("%s: out of memory for %s", w->file, r->key);
        memset(v + l->n, 0, (size_t)(index + 1 - l->n) * sizeof *v);
        l->v = v;
        l->n = index + 1;
    }
    int bad;
    if (meta_store(&l->v[index], spec->type, r->value, &bad) < 0)
        return -1;
    if (bad && meta_fatal(0, k))
        return error_set("%s line %ld: %s is '%s', not an integer of nanoseconds", w->file,
                         r->line, meta_shown(r->key, 0), meta_shown(r->value, 1));
    if (bad) {
        snprintf(what, sizeof what, "%s is '%s', not %s %s", meta_shown(r->key, 0),
                 meta_shown(r->value, 1), spec->type == RUN_META_INT ? "an" : "a",
                 run_meta_type_name(spec->type));
        meta_warn_one(w, r->line, what);
    }
    return 0;
}

static int meta_fixed_row(struct run_meta *m, enum run_meta_key k, const struct meta_row *r,
                          struct meta_warn *w)
{
    const struct run_meta_spec *spec = &run_meta_keys()[k];
    int bad;
    if (meta_store(meta_field(m, k), spec->type, r->value, &bad) < 0)
        return -1;
    if (bad && meta_fatal(1, k))
        return error_set("%s line %ld: %s is '%s', not %s %s", w->file, r->line, spec->key,
                         meta_shown(r->value, 1), spec->type == RUN_META_INT ? "an" : "a",
                         run_meta_type_name(spec->type));
    if (bad) {
        char what[256];
        snprintf(what, sizeof what, "%s is '%s', not %s %s", spec->key,
                 meta_shown(r->value, 1), spec->type == RUN_META_INT ? "an" : "a",
                 run_meta_type_name(spec->type));
        meta_warn_one(w, r->line, what);
    }
    return 0;
}

int meta_parse(struct run_meta *m, const struct meta_row *rows, size_t n, const char *file)
{
    struct meta_warn w = {.file = file};
    m->rows += n;
    for (size_t i = 0; i < n; i++) {
        const enum run_meta_key k = run_meta_key_of(rows[i].key);
        int rc = k != RUN_META_NONE ? meta_fixed_row(m, k, &rows[i], &w)
                                    : meta_indexed_row(m, &rows[i], m->rows, &w);
        if (rc < 0)
            return -1;
    }
    if (w.n > META_WARN_MAX)
        report_warn("%s: %d more unknown or malformed keys ignored", file, w.n - META_WARN_MAX);
    return 0;
}

int meta_set(struct run_meta *m, enum run_meta_key k, const char *value, const char *what)
{
    const struct meta_row r = {run_meta_key_name(k), value, 0};
    struct meta_warn w = {.file = what};
    return k > RUN_META_NONE && k < RUN_META_KEY_END ? meta_fixed_row(m, k, &r, &w) : 0;
}

int meta_is(const struct meta_value *v, const char *text)
{
    return v->s && strcmp(v->s, text) == 0;
}

const char *meta_text(const struct meta_value *v)
{
    return v->s ? v->s : "";
}

double meta_num(const struct meta_value *v, double absent)
{
    return v && v->s ? v->d : absent;
}

int meta_finite(const struct meta_value *v, double *out)
{
    if (!v->s || !isfinite(v->d))
        return 0;
    *out = v->d;
    return 1;
}

const char *meta_text_at(const struct meta_list *l, int index)
{
    const struct meta_value *v = meta_at(l, index);
    return v ? v->s : NULL;
}

const struct meta_value *meta_at(const struct meta_list *l, int index)
{
    return index >= 0 && index < l->n && l->v[index].s ? &l->v[index] : NULL;
}

int meta_run_of(const struct meta_list *l, int from)
{
    int k = from;
    while (meta_at(l, k))
        k++;
    return k - from;
}

void meta_free(struct run_meta *m)
{
    for (int k = RUN_META_NONE + 1; k < RUN_META_KEY_END; k++)
        free((char *)meta_field(m, (enum run_meta_key)k)->s);
    for (int k = 0; k < RUN_META_INDEXED_COUNT; k++) {
        struct meta_list *l = meta_list_of(m, k);
        for (int i = 0; i < l->n; i++)
            free((char *)l->v[i].s);
        free(l->v);
    }
    memset(m, 0, sizeof *m);
}
