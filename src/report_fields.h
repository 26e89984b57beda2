/* report_fields: the table of row fields that drives the CSV columns, the JSON keys and both readers, and the
 * helpers the writers (report.c) and readers (report_read.c) share. Internal to the report module. */
#ifndef MOK_REPORT_FIELDS_H
#define MOK_REPORT_FIELDS_H

#include <stddef.h>

#include "report.h"

/* The row fields, in CSV column order (a public format: append, never reorder; a rename bumps
 * MOK_REPORT_SCHEMA_VERSION and keeps the old name in v1_name for the readers; docs/report-columns.md names each,
 * and test_report fails when one is missing there). */
enum ftype { F_INT, F_LL, F_DBL, F_STR };
struct field {
    const char *name;
    enum ftype type;
    size_t off, size;
    int required;        /* readers refuse a file without it: a row means nothing without these */
    int time_us;         /* a time in us: the CSV writes it to 0.1 us or 4 significant digits */
    const char *v1_name; /* its name in schema 1 files, NULL when unchanged */
};
extern const struct field mok_report_fields[];
extern const int mok_report_nfields;
#define FIELD_PTR(row, f) ((char *)(row) + (f)->off)
#define FIELD_CPTR(row, f) ((const char *)(row) + (f)->off)

/* "path: what" into err; returns -1. */
int mok_report_set_err(char *err, int err_len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif
