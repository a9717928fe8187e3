/* options.c — the option tables' parsing, formatting and usage text (see options.h). */
#include "common/options.h"

#include "common/error.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ fields */

static void *opt_field(void *base, size_t offset) { return (char *)base + offset; }

static const void *opt_cfield(const void *base, size_t offset)
{
    return (const char *)base + offset;
}

/* an int-sized or int64_t-sized integer at p */
static int64_t opt_load_int(const void *p, size_t size)
{
    if (size == sizeof(int)) {
        int v;
        memcpy(&v, p, sizeof v);
        return v;
    }
    int64_t v; /* long or uint64_t, never above INT64_MAX here */
    memcpy(&v, p, sizeof v);
    return v;
}

static void opt_store_int(void *p, size_t size, int64_t v)
{
    if (size == sizeof(int)) {
        int w = (int)v;
        memcpy(p, &w, sizeof w);
    } else {
        memcpy(p, &v, sizeof v);
    }
}

static double opt_load_real(const void *p, size_t size)
{
    if (size == sizeof(float)) {
        float f;
        memcpy(&f, p, sizeof f);
        return f;
    }
    double d;
    memcpy(&d, p, sizeof d);
    return d;
}

int64_t opt_int(const struct opt *o, const void *base)
{
    return opt_load_int(opt_cfield(base, o->offset), o->size);
}

/* ------------------------------------------------------------------ the table */

int opt_takes(const struct opt_parser *p, const struct opt *o)
{
    return o->commands == 0 || (o->commands & p->takes) != 0;
}

int opt_find(const struct opt_parser *p, const char *a)
{
    for (int i = 0; i < p->nopts; i++) {
        const struct opt *o = &p->opts[i];
        if (opt_takes(p, o) && (strcmp(a, o->name) == 0 || (o->alias && strcmp(a, o->alias) == 0)))
            return i;
    }
    return -1;
}

int opt_given(const struct opt_parser *p, uint64_t given, const char *name)
{
    int k = opt_find(p, name);
    return k >= 0 && k < 64 && (given >> k & 1);
}

/* option o's i-th choice (its value in *value), NULL past the end */
static const char *opt_choice(const struct opt *o, int i, int *value)
{
    if (o->choice_at) {
        *value = i;
        return o->choice_at(i);
    }
    *value = o->choices[i].value;
    return o->choices[i].name;
}

/* "a, b or c" (sep ", ", last " or "), "a|b|c" (sep and last "|") */
static void opt_choice_list(const struct opt *o, const char *sep, const char *last, char *buf,
                            size_t cap)
{
    size_t at = 0;
    int n = 0, value;
    while (opt_choice(o, n, &value))
        n++;
    buf[0] = '\0';
    for (int i = 0; i < n && at < cap; i++) {
        int w = snprintf(buf + at, cap - at, "%s%s", i == 0 ? "" : i == n - 1 ? last : sep,
                         opt_choice(o, i, &value));
        if (w < 0)
            break;
        at += (size_t)w;
    }
}

/* ------------------------------------------------------------------ parsing */

/* "report: " or "" */
static const char *opt_prefix(const struct opt_parser *p, char *buf, size_t cap)
{
    if (!p->command)
        return "";
    snprintf(buf, cap, "%s: ", p->command);
    return buf;
}

/* "ddpprof report" or "ddpprof" */
static const char *opt_program(const struct opt_parser *p, char *buf, size_t cap)
{
    snprintf(buf, cap, "ddpprof%s%s", p->command ? " " : "", p->command ? p->command : "");
    return buf;
}

int opt_parse_number(const char *label, const char *s, const char *what, double min,
                     double max, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end != '\0' || !isfinite(v) || v < min || v > max)
        return error_set("%s: '%s' is not %s in [%g, %g]", label, s, what ? what : "a number",
                         min, max);
    *out = v;
    return 0;
}

/* s, one value of kind k (OPT_INT, OPT_DOUBLE, OPT_ENUM) of option o spelt opt: an integer
 * into *n, a number into *d, a choice's value into *n.  0 or -1 (error_set) */
static int opt_parse_value(const struct opt_parser *p, const struct opt *o, enum opt_kind k,
                           const char *opt, const char *s, int64_t *n, double *d)
{
    char pre[64], label[192];
    snprintf(label, sizeof label, "%s%s", opt_prefix(p, pre, sizeof pre), opt);
    switch (k) {
    case OPT_INT: {
        char *end;
        errno = 0;
        long long v = strtoll(s, &end, 10);
        if (errno || end == s || *end != '\0' || v < (long long)o->min || v > (long long)o->max)
            return error_set("%s: '%s' is not %s in [%lld, %lld]", label, s,
                             o->what ? o->what : "an integer", (long long)o->min,
                             (long long)o->max);
        *n = v;
        return 0;
    }
    case OPT_DOUBLE:
        return opt_parse_number(label, s, o->what, o->min, o->max, d);
    case OPT_ENUM: {
        int value;
        const char *name;
        for (int i = 0; (name = opt_choice(o, i, &value)); i++)
            if (strcmp(s, name) == 0) {
                *n = value;
                return 0;
            }
        char names[256];
        opt_choice_list(o, ", ", " or ", names, sizeof names);
        return error_set("%s: '%s' is not %s", label, s, names);
    }
    default:
        return error_set("%s: option kind %d is no value kind", label, (int)k);
    }
}

/* "1,4,25": each item as o->item into the array, the count into the int at offset2 */
static int opt_parse_list(const struct opt_parser *p, const struct opt *o, void *base,
                          const char *opt, const char *v)
{
    char pre[64], buf[512];
    size_t len = strlen(v);
    int n = 0;
    const char *at = v;
    while (len < sizeof buf) {
        size_t k = strcspn(at, ",");
        if (k == 0 || n >= o->cap)
            break;
        memcpy(buf, at, k);
        buf[k] = '\0';
        int64_t i = 0;
        double d = 0.0;
        if (opt_parse_value(p, o, o->item, opt, buf, &i, &d))
            return -1;
        void *slot = (char *)opt_field(base, o->offset) + (size_t)n * o->size;
        if (o->item == OPT_DOUBLE)
            memcpy(slot, &d, sizeof d);
        else
            opt_store_int(slot, o->size, i);
        n++;
        at += k;
        if (!*at) { /* the whole list */
            memcpy(opt_field(base, o->offset2), &n, sizeof n);
            return 0;
        }
        at++; /* the comma */
    }
    return error_set("%s%s: '%s' is not a list of at most %d items separated by commas",
                     opt_prefix(p, pre, sizeof pre), opt, v, o->cap);
}

/* option o, spelt opt, takes the value v (NULL for a flag) */
static int opt_set(const struct opt_parser *p, const struct opt *o, void *base, const char *opt,
                   const char *v)
{
    int64_t n = 0;
    double d = 0.0;
    void *field = opt_field(base, o->offset);
    switch (o->kind) {
    case OPT_FLAG:
        opt_store_int(field, o->size, o->flag_value);
        return 0;
    case OPT_INT:
    case OPT_ENUM:
        if (opt_parse_value(p, o, o->kind, opt, v, &n, &d))
            return -1;
        opt_store_int(field, o->size, n);
        return 0;
    case OPT_DOUBLE:
        if (opt_parse_value(p, o, o->kind, opt, v, &n, &d))
            return -1;
        if (o->scale > 0.0) {
            opt_store_int(field, o->size, llround(d * o->scale));
        } else if (o->size == sizeof(float)) {
            float f = (float)d;
            memcpy(field, &f, sizeof f);
        } else {
            memcpy(field, &d, sizeof d);
        }
        return 0;
    case OPT_STRING:
        memcpy(field, &v, sizeof v);
        return 0;
    case OPT_LIST:
        return opt_parse_list(p, o, base, opt, v);
    case OPT_CUSTOM:
        return o->parse(base, o, opt, v);
    }
    return error_set("%s: option kind %d unknown", opt, (int)o->kind);
}

int opt_parse(const struct opt_parser *p, void *base, int argc, char **argv, int first,
              uint64_t *given)
{
    char pre[64], prog[64];
    if (given)
        *given = 0;
    for (int i = first; i < argc; i++) {
        const char *a = argv[i];
        if (a[0] != '-' || a[1] == '\0') { /* an input, or stray */
            if (p->positional) {
                if (p->positional(p->ctx, a))
                    return -1;
                continue;
            }
            return error_set("%sunexpected argument '%s' (see %s --help)",
                             opt_prefix(p, pre, sizeof pre), a, opt_program(p, prog, sizeof prog));
        }
        int k = opt_find(p, a);
        if (k < 0)
            return error_set("%sunknown option '%s' (see %s --help)",
                             opt_prefix(p, pre, sizeof pre), a, opt_program(p, prog, sizeof prog));
        const struct opt *o = &p->opts[k];
        const char *v = NULL;
        if (o->kind != OPT_FLAG) {
            if (i + 1 >= argc)
                return error_set("%s%s needs a value (see %s --help)",
                                 opt_prefix(p, pre, sizeof pre), a,
                                 opt_program(p, prog, sizeof prog));
            v = argv[++i];
        }
        if (opt_set(p, o, base, a, v))
            return -1;
        if (given && k < 64)
            *given |= (uint64_t)1 << k;
    }
    return 0;
}

/* ------------------------------------------------------------------ values as text */

/* The shortest text that reads back as v: as a float when is_float, as round(x * scale)
 * when scale > 0 (v is then that integer), else as the double v.  A float or a scaled
 * value that is a whole number is exact in the double x, so "%.0f" reads back as it. */
static void opt_format_real(char *buf, size_t cap, double v, int is_float, double scale)
{
    double x = scale > 0.0 ? v / scale : v;
    if (x == floor(x) && fabs(x) < 1e15) { /* whole numbers without an exponent: 300 */
        snprintf(buf, cap, "%.0f", x);
        return;
    }
    for (int p = 1; p <= 17; p++) {
        snprintf(buf, cap, "%.*g", p, x);
        double back = strtod(buf, NULL);
        if (scale > 0.0 ? (double)llround(back * scale) == v
                        : is_float ? (float)back == (float)v : back == v)
            return;
    }
}

/* the name of o's choice of value v, or NULL */
static const char *opt_choice_name(const struct opt *o, int64_t v)
{
    int value;
    const char *name;
    for (int i = 0; (name = opt_choice(o, i, &value)); i++)
        if (value == v)
            return name;
    return NULL;
}

int opt_format(const struct opt *o, const void *base, char *buf, size_t cap)
{
    buf[0] = '\0';
    const void *field = opt_cfield(base, o->offset);
    switch (o->kind) {
    case OPT_FLAG:
        return 0;
    case OPT_INT:
        snprintf(buf, cap, "%lld", (long long)opt_load_int(field, o->size));
        return 1;
    case OPT_DOUBLE:
        if (o->scale > 0.0)
            opt_format_real(buf, cap, (double)opt_load_int(field, o->size), 0, o->scale);
        else
            opt_format_real(buf, cap, opt_load_real(field, o->size), o->size == sizeof(float),
                            0.0);
        return 1;
    case OPT_STRING: {
        const char *s;
        memcpy(&s, field, sizeof s);
        if (!s)
            return 0;
        snprintf(buf, cap, "%s", s);
        return 1;
    }
    case OPT_ENUM: {
        int64_t v = opt_load_int(field, o->size);
        const char *name = opt_choice_name(o, v);
        if (name)
            snprintf(buf, cap, "%s", name);
        else
            snprintf(buf, cap, "%lld", (long long)v);
        return 1;
    }
    case OPT_LIST: {
        int n;
        memcpy(&n, opt_cfield(base, o->offset2), sizeof n);
        size_t at = 0;
        for (int i = 0; i < n && at < cap; i++) {
            const void *slot = (const char *)field + (size_t)i * o->size;
            char item[64];
            const char *name =
                o->item == OPT_ENUM ? opt_choice_name(o, opt_load_int(slot, o->size)) : NULL;
            if (o->item == OPT_DOUBLE)
                opt_format_real(item, sizeof item, opt_load_real(slot, o->size), 0, 0.0);
            else if (name)
                snprintf(item, sizeof item, "%s", name);
            else
                snprintf(item, sizeof item, "%lld", (long long)opt_load_int(slot, o->size));
            int w = snprintf(buf + at, cap - at, "%s%s", i ? "," : "", item);
            if (w < 0)
                break;
            at += (size_t)w;
        }
        return n > 0;
    }
    case OPT_CUSTOM:
        return o->format ? o->format(base, o, buf, cap) : 0;
    }
    return 0;
}

/* ------------------------------------------------------------------ usage */

#define USAGE_INDENT 26
#define USAGE_WIDTH 92

/* text from column col on, words wrapped at USAGE_WIDTH onto lines indented USAGE_INDENT */
static void opt_usage_wrap(FILE *out, const char *text, int col)
{
    const char *p = text;
    while (*p) {
        while (*p == ' ')
            p++;
        size_t len = strcspn(p, " ");
        if (!len)
            break;
        if (col > USAGE_INDENT && col + 1 + (int)len > USAGE_WIDTH) {
            fprintf(out, "\n%*s", USAGE_INDENT, "");
            col = USAGE_INDENT;
        } else if (col > USAGE_INDENT) {
            fputc(' ', out);
            col++;
        }
        fprintf(out, "%.*s", (int)len, p);
        col += (int)len;
        p += len;
    }
    fputc('\n', out);
}

void opt_usage(FILE *out, const struct opt_parser *p, const void *defaults,
               const char *(*who)(const struct opt *o))
{
    const char *group = NULL;
    for (int i = 0; i < p->nopts; i++) {
        const struct opt *o = &p->opts[i];
        if (!opt_takes(p, o))
            continue;
        if (o->group && (!group || strcmp(group, o->group) != 0))
            fprintf(out, "%s:\n", group = o->group);
        char meta[160], left[224], text[1024], value[512];
        if (o->kind == OPT_ENUM || (o->kind == OPT_LIST && o->item == OPT_ENUM && !o->metavar))
            opt_choice_list(o, "|", "|", meta, sizeof meta);
        else
            snprintf(meta, sizeof meta, "%s", o->metavar ? o->metavar : "");
        snprintf(left, sizeof left, "  %s%s%s%s%s", o->alias ? o->alias : "",
                 o->alias ? ", " : "", o->name, meta[0] ? " " : "", meta);
        int col = (int)strlen(left);
        fputs(left, out);
        if (col < USAGE_INDENT)
            fprintf(out, "%*s", USAGE_INDENT - col, "");
        else
            fprintf(out, "\n%*s", USAGE_INDENT, "");
        size_t at = (size_t)snprintf(text, sizeof text, "%s%s", who ? who(o) : "",
                                     o->help_fn ? o->help_fn() : o->help);
        if (at >= sizeof text)
            at = sizeof text - 1;
        if (o->dflt && o->dflt[0])
            snprintf(text + at, sizeof text - at, " (default: %s)", o->dflt);
        else if (!o->dflt && defaults && opt_format(o, defaults, value, sizeof value))
            snprintf(text + at, sizeof text - at, " (default %s)", value);
        opt_usage_wrap(out, text, USAGE_INDENT);
    }
}
