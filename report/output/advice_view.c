/* advice_view.c — the advice's lines, page block and advice.csv (see advice_view.h). */
#include "report/output/advice_view.h"

#include <math.h>
#include <stdio.h>

size_t advice_nlines(const struct advice *a)
{
    const size_t s = advice_shown(a);
    return 1 + (s ? s : 1);
}

/* Why no candidate is shown: "no rule's threshold was reached", or the statuses of those
 * there are */
static void advice_why_none(const struct advice *a, char *buf, size_t size)
{
    if (a->n == 0) {
        snprintf(buf, size, "no rule's threshold was reached (report/FORMULAS.md \"Advice\")");
        return;
    }
    int len = a->n == 1 ? snprintf(buf, size, "the one candidate in advice.csv is not "
                                              "recommended:")
                        : snprintf(buf, size, "none of the %zu candidates in advice.csv is "
                                              "recommended:", a->n);
    const char *sep = "";
    if (a->noise && len >= 0 && (size_t)len < size) {
        if (a->has_noise)
            len += snprintf(buf + len, size - (size_t)len, " %zu inside the noise (the step "
                                                            "moves +-%.2f ms by itself)",
                            a->noise, a->noise_ms);
        else
            len += snprintf(buf + len, size - (size_t)len, " %zu inside the noise", a->noise);
        sep = ",";
    }
    if (a->slower && len >= 0 && (size_t)len < size) {
        len += snprintf(buf + len, size - (size_t)len, "%s %zu measured slower (ddpprof tune)",
                        sep, a->slower);
        sep = ",";
    }
    if (a->under_load && len >= 0 && (size_t)len < size)
        len += snprintf(buf + len, size - (size_t)len, "%s %zu predicted while the run was under "
                                                        "load (the prediction assumes an idle "
                                                        "machine)",
                        sep, a->under_load);
    if (len >= 0 && (size_t)len < size)
        snprintf(buf + len, size - (size_t)len, " (report/FORMULAS.md \"Advice\")");
}

void advice_line(const struct advice *a, size_t k, char *buf, size_t size)
{
    if (size == 0)
        return;
    if (k == 0) {
        snprintf(buf, size, "%s", a->verdict ? a->verdict : "verdict: -");
        return;
    }
    if (advice_shown(a) == 0) {
        char why[512];
        advice_why_none(a, why, sizeof why);
        if (a->cause_action) /* the verdict named why it is slower: act on that */
            snprintf(buf, size, "what to do, from the verdict's cause (%s): %s; %s",
                     a->cause_name ? a->cause_name : "-", a->cause_action, why);
        else if (a->gap)
            snprintf(buf, size, "%s, but the run is slower than it should be: ddpprof diff says "
                                "where its step time went (diff.csv)", why);
        else
            snprintf(buf, size, "no recommendation: %s", why);
        return;
    }
    const struct advice_item *it = &a->items[k - 1];
    const double s = it->saving_ms;
    const int digits = fabs(s) < 1.0 ? 2 : 1;
    char range[96] = "";
    if (it->has_interval)
        snprintf(range, sizeof range, " (%+.*f to %+.*f)", digits, -it->saving_lo_ms, digits,
                 -it->saving_hi_ms);
    const char *up = it->source == ADVICE_MEASURED ? "up to " : it->source == ADVICE_AB ? ""
                                                                                         : "about ";
    snprintf(buf, size, "%zu. %s [%s%+.*f ms per step%s, %s]", k, it->text, up, digits, -s,
             range, advice_source_name(it->source));
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

enum advice_col { AD_ORDER, AD_SHOWN, AD_RUN, AD_RULE, AD_SAVING, AD_SAVING_LO, AD_SAVING_HI,
                  AD_PCT, AD_SOURCE, AD_STATUS, AD_NOISE, AD_AB, AD_TEXT, AD_NCOLS };
const struct table_col advice_cols[AD_NCOLS] = {
    [AD_ORDER] = {"order", "order", "", 0},
    [AD_SHOWN] = {"shown", "shown", "", 0},
    [AD_RUN] = {"run", "run", "", 1},
    [AD_RULE] = {"rule", "rule", "", 1},
    [AD_SAVING] = {"saving_ms", "saving", "ms", 0},
    [AD_SAVING_LO] = {"saving_lo_ms", "saving low", "ms", 0},
    [AD_SAVING_HI] = {"saving_hi_ms", "saving high", "ms", 0},
    [AD_PCT] = {"saving_pct_of_step", "of step", "%", 0},
    [AD_SOURCE] = {"source", "source", "", 1},
    [AD_STATUS] = {"status", "status", "", 1},
    [AD_NOISE] = {"noise_ms", "noise", "ms", 0},
    [AD_AB] = {"ab_verdict", "A/B", "", 1},
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
        if (it->has_interval) {
            table_set(t, AD_SAVING_LO, "%.3f", it->saving_lo_ms);
            table_set(t, AD_SAVING_HI, "%.3f", it->saving_hi_ms);
        }
        table_set(t, AD_PCT, "%.2f", advice_pct(it->saving_ms, it->step_ms));
        table_set(t, AD_SOURCE, "%s", advice_source_name(it->source));
        table_set(t, AD_STATUS, "%s", advice_status_name(it->status));
        if (it->has_noise)
            table_set(t, AD_NOISE, "%.3f", it->noise_ms);
        if (it->ab_verdict)
            table_set(t, AD_AB, "%s", it->ab_verdict);
        table_set(t, AD_TEXT, "%s", it->text);
    }
}
