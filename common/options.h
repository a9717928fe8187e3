/* options.h — the one command-line option parser of every ddpprof command.
 *
 * A command declares its options once, as a table of struct opt (name, short alias, kind,
 * the field of the command's own struct the value goes to, bounds, choices, default, help,
 * group).  opt_parse reads argv with it; opt_usage prints the options' part of --help from
 * it, each default printed from the struct as the command starts (not written by hand).
 * The trainer's commands (trainer/cli.c: the main job, train, worker, tune) share one table;
 * the report's have theirs (report/report.c: report and diff; report/predict_cli.c:
 * predict).
 *
 * Strict, and every command says a bad command line the same way, in one line
 * (error_set), prefixed with the command's name where it has one ("report: "):
 *   unknown option '--bogus' (see ddpprof report --help)
 *   unexpected argument 'x' (see ddpprof --help)       (a command that takes no input)
 *   --out needs a value (see ddpprof report --help)
 *   --epochs: '3x' is not an integer in [1, 1000000]
 *   --lr: '-1' is not a number in [0, 1e+06]
 *   --amp: 'fp8' is not fp16, bf16 or off
 *   --gpu: 'x' is not an integer in [0, 1023]            (an item of a list)
 * Every number must parse completely and lie in range; a later option wins. */
#ifndef DDPPROF_OPTIONS_H
#define DDPPROF_OPTIONS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

enum opt_kind {
    OPT_FLAG,   /* no value: sets an int field to flag_value */
    OPT_INT,    /* a whole number in [min, max] into an int, or an int64_t-sized field */
    OPT_DOUBLE, /* a number in [min, max] into a float or double field; with scale, into an
                   int field as round(value * scale) */
    OPT_STRING, /* a const char * pointing into argv */
    OPT_ENUM,   /* one of choices (or choice_at's names), its value into an int field */
    OPT_LIST,   /* items separated by commas, each an OPT_INT, OPT_DOUBLE (a double) or
                   OPT_ENUM (an int) as item says, into the array at offset, their count into
                   the int at offset2; at most cap of them */
    OPT_CUSTOM, /* parse and format are the command's own */
};

struct opt_choice {
    const char *name;
    int value;
};

struct opt {
    const char *name;    /* "--epochs" */
    const char *alias;   /* "-e", or NULL */
    enum opt_kind kind;
    unsigned commands;   /* the commands that take it, as bits the command defines (0: every
                            command of the table) */
    size_t offset, size; /* its field in the command's struct (OPT_LIST: the array, and the
                            size of one item) */
    size_t offset2;      /* OPT_LIST: the count, an int; OPT_CUSTOM: the command's own */
    enum opt_kind item;  /* OPT_LIST: what each item is */
    int cap;             /* OPT_LIST: items at most */
    double min, max;     /* OPT_INT, OPT_DOUBLE, and a list's items */
    double scale;        /* OPT_DOUBLE into an int field: stored units per 1 (0: none) */
    int flag_value;      /* OPT_FLAG */
    const struct opt_choice *choices; /* OPT_ENUM (and its lists), ended by a NULL name */
    const char *(*choice_at)(int i);  /* OPT_ENUM without choices: the i-th name (value i),
                                         NULL past the end (a registry elsewhere) */
    const char *what;    /* what a value (a list's item) must be, in its error: "a whole rank
                            count" (NULL: "an integer", "a number") */
    /* OPT_CUSTOM: value (spelt as opt) into the command's struct base: 0 or -1 (error_set);
     * and base's value as text into buf: 1, or 0 when it has none */
    int (*parse)(void *base, const struct opt *o, const char *opt, const char *value);
    int (*format)(const void *base, const struct opt *o, char *buf, size_t cap);
    const char *metavar; /* "N", "DIR" (OPT_ENUM: made from the choices) */
    const char *dflt;    /* the default in words where the value alone would mislead; NULL:
                            the value in the defaults given to opt_usage; "": none shown */
    const char *(*help_fn)(void); /* the help made at run time (--model: the registry's) */
    int tag;             /* the command's own use (the trainer: the option's meta.csv key) */
    const char *group;   /* its heading in --help */
    const char *help;
};

/* the field f of struct type T (OPT_LIST: the array f, its count n, cap its length) */
#define OPT_FIELD(T, f) .offset = offsetof(T, f), .size = sizeof(((T *)0)->f)
#define OPT_LIST_FIELD(T, f, n)                                                               \
    .offset = offsetof(T, f), .size = sizeof(((T *)0)->f[0]), .offset2 = offsetof(T, n),       \
    .cap = (int)(sizeof(((T *)0)->f) / sizeof(((T *)0)->f[0]))

/* One command's view of a table. */
struct opt_parser {
    const struct opt *opts;
    int nopts;           /* at most 64 (opt_parse's given has a bit each) */
    unsigned takes;      /* this command: the options whose commands share a bit with it */
    const char *command; /* "report": its messages begin "report: " and send to
                            "ddpprof report --help"; NULL: the program's ("ddpprof --help") */
    /* a word that is not an option (an input): 0, or -1 (error_set); NULL: none taken */
    int (*positional)(void *ctx, const char *arg);
    void *ctx;
};

/* Parse argv[first..argc) into base (the command's struct, already at its defaults): each
 * option in order, a later one winning; each other word to p->positional ("-" is a word, not
 * an option).  *given (may be NULL) gets bit i for option i of the table that was on the
 * command line.  Strings point into argv.  0, or -1 (error_set: one line, as above). */
int opt_parse(const struct opt_parser *p, void *base, int argc, char **argv, int first,
              uint64_t *given);

/* The index in the table of the option spelt a (name or alias) that p's command takes,
 * or -1. */
int opt_find(const struct opt_parser *p, const char *a);

/* 1 when the option spelt name (a name or alias p's command takes) has its bit in given
 * (opt_parse's) */
int opt_given(const struct opt_parser *p, uint64_t given, const char *name);

/* 1 when p's command takes option o */
int opt_takes(const struct opt_parser *p, const struct opt *o);

/* Option o's value in base as the command line spells it, into buf: 1, or 0 when it has
 * none (an unset string, an empty list, a flag).  Numbers in the fewest digits that read
 * back as the same value. */
int opt_format(const struct opt *o, const void *base, char *buf, size_t cap);

/* The strict number parse every option's number goes through: all of s a finite number in
 * [min, max] into *out, 0; else -1 and error_set "LABEL: 'S' is not WHAT in [MIN, MAX]"
 * (what NULL: "a number"), for a command's own values (--normalize's two). */
int opt_parse_number(const char *label, const char *s, const char *what, double min,
                     double max, double *out);

/* An OPT_FLAG's, OPT_INT's or OPT_ENUM's value in base (an OPT_DOUBLE's with scale too). */
int64_t opt_int(const struct opt *o, const void *base);

/* The options of --help: every option p's command takes, under its group's heading
 * ("training:"), as "  -e, --epochs N" then its help and its default (o->dflt, else its
 * value in defaults: the command's struct at its defaults, or NULL for none), wrapped at 92
 * columns.  who (may be NULL) gives the words put before an option's help ("tune: "). */
void opt_usage(FILE *out, const struct opt_parser *p, const void *defaults,
               const char *(*who)(const struct opt *o));

#ifdef __cplusplus
}
#endif
#endif
