/* table.c — result tables (see table.h). */
#include "report/output/table.h"

#include <csv.h>
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/printable.h"
#include "report/output/outfile.h"
#include "common/vec.h"

void table_init(struct table *t, const char *title, const char *file,
                const struct table_col *cols, int ncols)
{
    memset(t, 0, sizeof *t);
    t->title = title;
    t->file = file;
    t->cols = cols;
    t->ncols = ncols;
}

void table_free(struct table *t)
{
    free(t->cells);
    free(t->text);
    t->cells = NULL;
    t->text = NULL;
    t->nrows = t->cap_cells = t->tlen = t->tcap = 0;
}

void table_add_row(struct table *t)
{
    if (t->failed)
        return;
    if (VEC_RESERVE(t->cells, t->cap_cells, (t->nrows + 1) * (size_t)t->ncols)) {
        t->failed = 1;
        return;
    }
    memset(&t->cells[t->nrows * (size_t)t->ncols], 0, (size_t)t->ncols * sizeof *t->cells);
    t->nrows++;
}

void table_set(struct table *t, int col, const char *fmt, ...)
{
    if (t->failed || t->nrows == 0 || col < 0 || col >= t->ncols)
        return;
    char small[128];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n < 0) {
        t->failed = 1;
        return;
    }
    if (VEC_RESERVE(t->text, t->tcap, t->tlen + (size_t)n + 1)) {
        t->failed = 1;
        return;
    }
    if ((size_t)n < sizeof small) {
        memcpy(t->text + t->tlen, small, (size_t)n + 1);
    } else {
        va_start(ap, fmt);
        vsnprintf(t->text + t->tlen, (size_t)n + 1, fmt, ap);
        va_end(ap);
    }
    t->cells[(t->nrows - 1) * (size_t)t->ncols + (size_t)col] = t->tlen + 1;
    t->tlen += (size_t)n + 1;
}

const char *table_get(const struct table *t, size_t row, int col)
{
    size_t off = t->cells[row * (size_t)t->ncols + (size_t)col];
    return off ? t->text + off - 1 : "";
}

/* 1 when s is a plain number ("-1.5", "+3", "2e-05", "-inf", "nan"), which a spreadsheet
 * reads as a number, not a formula */
static int table_is_number(const char *s)
{
    char *end;
    if (!*s)
        return 0;
    strtod(s, &end);
    return *end == '\0' && strspn(s, "+-0123456789.eEinfatyINFATY") == strlen(s);
}

/* A field needs quoting when it holds the delimiter, a quote, a line break or would lose
 * leading/trailing spaces to a trimming reader.  A text that a spreadsheet would take for a
 * formula (it starts with = + - @, a tab or a carriage return: an op name, a host, a path
 * from a trace) is written with a ' before it, as OWASP advises against CSV injection;
 * numbers stay as they are. */
static int table_field_write(FILE *f, const char *s)
{
    size_t n = strlen(s);
    char *text = NULL;
    if (n && strchr("=+-@\t\r", s[0]) && !table_is_number(s)) {
        if (asprintf(&text, "'%s", s) < 0)
            return -1;
        s = text;
        n++;
    }
    int rc;
    if (strpbrk(s, ",\"\r\n") || (n && (s[0] == ' ' || s[n - 1] == ' ')))
        rc = csv_fwrite(f, s, n);
    else
        rc = fwrite(s, 1, n, f) == n ? 0 : -1;
    free(text);
    return rc;
}

int table_write_csv(const struct table *t, const char *dir)
{
    char *path = NULL;
    if (asprintf(&path, "%s/%s", dir, t->file) < 0)
        return error_set("report: out of memory naming %s/%s", dir, t->file);
    if (t->failed) {
        error_set("%s: out of memory while building the table", path);
        free(path);
        return -1;
    }
    struct outfile o;
    if (outfile_open(&o, path) < 0) {
        free(path);
        return -1;
    }
    FILE *f = o.f; /* a failed write leaves ferror set: outfile_close says so */
    for (int c = 0; c < t->ncols; c++) {
        if (c)
            fputc(',', f);
        table_field_write(f, t->cols[c].csv);
    }
    fputc('\n', f);
    for (size_t r = 0; r < t->nrows; r++) {
        for (int c = 0; c < t->ncols; c++) {
            if (c)
                fputc(',', f);
            table_field_write(f, table_get(t, r, c));
        }
        fputc('\n', f);
    }
    int rc = outfile_close(&o, 1);
    free(path);
    return rc;
}

/* A cell as the terminal shows it: "-" for none, its control bytes escaped (a line break
 * in an op name must not split the row, an escape sequence must not reach the terminal). */
static const char *table_shown(const char *s, char *buf, size_t cap)
{
    if (!s[0])
        return "-";
    return text_has_control(s) ? text_printable(s, (size_t)-1, buf, cap) : s;
}

/* Append one cell, padded to w, to line at *len. */
static void table_cell(char *line, size_t *len, int left, int w, const char *s)
{
    *len += (size_t)sprintf(line + *len, left ? "  %-*s" : "  %*s", w, s);
}

/* Print line without trailing spaces. */
static void table_line(FILE *out, char *line, size_t len)
{
    while (len > 0 && line[len - 1] == ' ')
        len--;
    fwrite(line, 1, len, out);
    fputc('\n', out);
}

void table_print(const struct table *t, FILE *out, size_t max_rows)
{
    if (!out)
        return;
    size_t shown = t->nrows < max_rows ? t->nrows : max_rows;
    int *w = calloc((size_t)t->ncols, sizeof *w);
    size_t linecap = 8;
    for (int c = 0; w && c < t->ncols; c++) {
        w[c] = (int)strlen(t->cols[c].label);
        int u = (int)strlen(t->cols[c].unit) + 2;
        if (t->cols[c].unit[0] && u > w[c])
            w[c] = u;
        for (size_t r = 0; r < shown; r++) {
            char esc[1024];
            int n = (int)strlen(table_shown(table_get(t, r, c), esc, sizeof esc));
            if (n > w[c])
                w[c] = n;
        }
        linecap += (size_t)w[c] + 2;
    }
    char *line = w ? malloc(linecap) : NULL;
    if (!line) {
        free(w);
        return;
    }
    size_t len;
    fprintf(out, "#\n# %s  (%s)\n", t->title, t->file);
    line[0] = '#';
    len = 1;
    for (int c = 0; c < t->ncols; c++)
        table_cell(line, &len, t->cols[c].left, w[c], t->cols[c].label);
    table_line(out, line, len);
    len = 1;
    for (int c = 0; c < t->ncols; c++) {
        char unit[64] = "";
        if (t->cols[c].unit[0])
            snprintf(unit, sizeof unit, "(%s)", t->cols[c].unit);
        table_cell(line, &len, t->cols[c].left, w[c], unit);
    }
    table_line(out, line, len);
    for (size_t r = 0; r < shown; r++) {
        line[0] = ' ';
        len = 1;
        for (int c = 0; c < t->ncols; c++) {
            char esc[1024];
            table_cell(line, &len, t->cols[c].left, w[c],
                       table_shown(table_get(t, r, c), esc, sizeof esc));
        }
        table_line(out, line, len);
    }
    if (t->nrows == 0)
        fputs("#  (no rows)\n", out);
    else if (shown < t->nrows)
        fprintf(out, "#  ... %zu more row(s) in %s\n", t->nrows - shown, t->file);
    free(line);
    free(w);
}

void html_escape(FILE *out, const char *s)
{
    for (; *s; s++) {
        switch (*s) {
        case '&': fputs("&amp;", out); break;
        case '<': fputs("&lt;", out); break;
        case '>': fputs("&gt;", out); break;
        case '"': fputs("&quot;", out); break;
        default: fputc(*s, out); break;
        }
    }
}

void table_write_html(const struct table *t, FILE *out, size_t max_rows)
{
    size_t shown = t->nrows < max_rows ? t->nrows : max_rows;
    fputs("<table>\n<caption>", out);
    html_escape(out, t->title);
    fputs(" <span class=\"file\">", out);
    html_escape(out, t->file);
    fputs("</span></caption>\n<tr>", out);
    for (int c = 0; c < t->ncols; c++) {
        fputs(t->cols[c].left ? "<th class=\"l\">" : "<th>", out);
        html_escape(out, t->cols[c].label);
        if (t->cols[c].unit[0]) {
            fputs("<br><span class=\"unit\">(", out);
            html_escape(out, t->cols[c].unit);
            fputs(")</span>", out);
        }
        fputs("</th>", out);
    }
    fputs("</tr>\n", out);
    for (size_t r = 0; r < shown; r++) {
        fputs("<tr>", out);
        for (int c = 0; c < t->ncols; c++) {
            fputs(t->cols[c].left ? "<td class=\"l\">" : "<td>", out);
            const char *cell = table_get(t, r, c);
            html_escape(out, cell[0] ? cell : "-");
            fputs("</td>", out);
        }
        fputs("</tr>\n", out);
    }
    if (t->nrows == 0)
        fprintf(out, "<tr><td class=\"l\" colspan=\"%d\">(no rows)</td></tr>\n", t->ncols);
    if (shown < t->nrows)
        fprintf(out, "<tr><td class=\"l\" colspan=\"%d\">... %zu more row(s) in %s</td></tr>\n",
                t->ncols, t->nrows - shown, t->file);
    fputs("</table>\n", out);
}
