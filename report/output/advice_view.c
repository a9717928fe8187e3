/* advice_view.c — the advice's lines, page block and advice.csv (see advice_view.h). */
#include "report/output/advice_view.h"

#include <stdio.h>

size_t advice_nlines(const struct advice *a)
{
    const size_t s = advice_shown(a);
    return 1 + (s ? s : 1);
}

static const char *const source_names[] = {
    [ADVICE_MEASURED] = "measured",
    [ADVICE_PREDICTED] = "predicted",
    [ADVICE_ASSUMED] = "assumed",
};

void advice_line(const struct advice *a, size_t k, char *buf, size_t size)
{
    if (size == 0)
        return;
    if (k == 0) {
        snprintf(buf, size, "%s", a->verdict ? a->verdict : "verdict: -");
        return;
    }
    if (advice_shown(a) == 0) {
        if (a->cause_action) /* the verdict named why it is slower: act on that */
            snprintf(buf, size, "what to do, from the verdict's cause (%s): %s; no rule's "
                                "threshold was reached (report/FORMULAS.md \"Advice\")",
                     a->cause_name ? a->cause_name : "-", a->cause_action);
        else if (a->gap)
            snprintf(buf, size, "no rule's threshold was reached (report/FORMULAS.md "
                                "\"Advice\"), but the run is slower than it should be: "
                                "ddpprof diff says where its step time went (diff.csv)");
        else
            snprintf(buf, size, "no recommendation: no rule's threshold was reached "
                                "(report/FORMULAS.md \"Advice\")");
        return;
    }
    const struct advice_item *it = &a->items[k - 1];
    const double s = it->saving_ms;
    const char *up = it->source == ADVICE_MEASURED ? "up to " : "about ";
    snprintf(buf, size, "%zu. %s [%s-%.*f ms per step, %s]", k, it->text, up,
             s < 1.0 ? 2 : 1, s, source_names[it->source]);
}

void advice_print(const struct advice *a, FILE *out)
{
    char line[ADVICE_LINE_MAX];
    fputs("#\n", out);
    for (size_t k = 0; k < advice_nlines(a); k++) {
        advice_line(a, k, line, sizeof line);
        fprintf(out, "# %s\n", line);
    }
}

void advice_write_html(const struct advice *a, FILE *out)
{
    char line[ADVICE_LINE_MAX];
    fputs("<div class=\"advice\">\n", out);
    for (size_t k = 0; k < advice_nlines(a); k++) {
        advice_line(a, k, line, sizeof line);
        fputs(k == 0 ? "<p class=\"verdict\">" : "<p class=\"advice\">", out);
        html_escape(out, line);
        fputs("</p>\n", out);
    }
    fputs("</div>\n", out);
}

enum advice_col { AD_ORDER, AD_SHOWN, AD_RUN, AD_RULE, AD_SAVING, AD_PCT, AD_SOURCE,
                  AD_TEXT, AD_NCOLS };
const struct table_col advice_cols[AD_NCOLS] = {
    [AD_ORDER] = {"order", "order", "", 0},
    [AD_SHOWN] = {"shown", "shown", "", 0},
    [AD_RUN] = {"run", "run", "", 1},
    [AD_RULE] = {"rule", "rule", "", 1},
    [AD_SAVING] = {"saving_ms", "saving", "ms", 0},
    [AD_PCT] = {"saving_pct_of_step", "of step", "%", 0},
    [AD_SOURCE] = {"source", "source", "", 1},
    [AD_TEXT] = {"text", "text", "", 1}};
const int advice_ncols = AD_NCOLS;

void advice_table(const struct advice *a, const struct runset *rs, struct table *t)
{
    table_add_row(t);
    table_set(t, AD_ORDER, "0");
    table_set(t, AD_SHOWN, "1");
    table_set(t, AD_RULE, "verdict");
    table_set(t, AD_TEXT, "%s", a->verdict ? a->verdict : "");
    for (size_t k = 0; k < a->n; k++) {
        const struct advice_item *it = &a->items[k];
        table_add_row(t);
        table_set(t, AD_ORDER, "%zu", k + 1);
        table_set(t, AD_SHOWN, "%d", k < advice_shown(a));
        table_set(t, AD_RUN, "%s", rs->runs[it->run].label);
        table_set(t, AD_RULE, "%s", it->rule);
        table_set(t, AD_SAVING, "%.3f", it->saving_ms);
        table_set(t, AD_PCT, "%.2f", advice_pct(it->saving_ms, it->step_ms));
        table_set(t, AD_SOURCE, "%s", source_names[it->source]);
        table_set(t, AD_TEXT, "%s", it->text);
    }
}
