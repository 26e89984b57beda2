/* report_fields: the table of row fields that drives the CSV columns, the JSON keys and both readers, and the
 * helpers the writers (report.c) and readers (report_read.c) share. Internal to the report module. */
#ifndef MOK_REPORT_FIELDS_H
#define MOK_REPORT_FIELDS_H

#include <stddef.h>

#include "report.h"

/* The row fields, in CSV column order (a public format: append, never rename or reorder). */
enum ftype { F_INT, F_LL, F_DBL, F_STR };
struct field {
    const char *name;
    enum ftype type;
    size_t off, size;
    int required; /* readers refuse a file without it: a row means nothing without these */
};
extern const struct field mok_report_fields[];
extern const int mok_report_nfields;
#define FIELD_PTR(row, f) ((char *)(row) + (f)->off)
#define FIELD_CPTR(row, f) ((const char *)(row) + (f)->off)

/* "path: what" into err; returns -1. */
int mok_report_set_err(char *err, int err_len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* The shortest of %.15g..%.17g that reads back to exactly v (NaN: empty). */
void mok_report_fmt_exact(char *buf, size_t len, double v);

#endif
