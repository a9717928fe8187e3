/* table.h — one result table, written three ways: RFC 4180 CSV through libcsv, an aligned
 * terminal table with units in a second header line (nccl-tests style), and an HTML table.
 * Cells are strings formatted once, so the three outputs always agree; "" is no value
 * (shown as "-" on the terminal and in HTML). */
#ifndef DDPPROF_REPORT_TABLE_H
#define DDPPROF_REPORT_TABLE_H

#include <stddef.h>
#include <stdio.h>

struct table_col {
    const char *csv;   /* CSV header, unit included: "total_ms" */
    const char *label; /* terminal header: "total" */
    const char *unit;  /* terminal unit line: "ms" ("" for none) */
    int left;          /* left-aligned (text) rather than right-aligned (numbers) */
};

struct table {
    const char *title; /* "phases: time per phase, per run and rank" */
    const char *file;  /* "phases.csv" */
    const struct table_col *cols;
    int ncols;
    size_t *cells; /* nrows * ncols offsets into text, + 1 (0: empty cell) */
    size_t nrows, cap_cells; /* cap_cells: room in cells, in cells */
    char *text;    /* every cell's string, NUL-terminated, back to back */
    size_t tlen, tcap;
    int failed; /* out of memory while filling: table_write_csv fails */
};

void table_init(struct table *t, const char *title, const char *file,
                const struct table_col *cols, int ncols);
void table_free(struct table *t);

/* Append an empty row (all cells ""); later table_set calls fill it. */
void table_add_row(struct table *t);

/* Format the cell of column col in the last row.  On out of memory the table is marked
 * failed (reported by table_write_csv). */
void table_set(struct table *t, int col, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

const char *table_get(const struct table *t, size_t row, int col);

/* Write dir/t->file.  Returns 0, or -1 after error_set naming the file. */
int table_write_csv(const struct table *t, const char *dir);

/* Print the title, the two header lines and up to max_rows rows (then a line saying how
 * many more are in the CSV file). */
void table_print(const struct table *t, FILE *out, size_t max_rows);

/* An HTML <table> of up to max_rows rows, with a caption. */
void table_write_html(const struct table *t, FILE *out, size_t max_rows);

/* Write s with &, <, >, " escaped for HTML/SVG text and attributes. */
void html_escape(FILE *out, const char *s);

#endif
