/* report_read: the CSV and JSON report readers, for the round-trip tests, --resume and later tools. They accept
 * what the writers (report.c) produce and what spreadsheets make of it (CRLF, a byte-order mark, reordered or
 * extra columns), and refuse anything ambiguous with a message naming the file, the line and the column. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "desc.h"
#include "report_fields.h"

#define FAIL(...)                                                                                             \
    do {                                                                                                      \
        mok_report_set_err(err, err_len, __VA_ARGS__);                                                        \
        goto out;                                                                                             \
    } while (0)

/* Schema 1 had no speedup_baseline: its speedup_vs_nccl was against the best candidate of one implementation per
 * mode (bench.c of schema 1: nccl in layer mode, nccl-p2p in comm mode, cublas-gemm in gemm mode). The row's mode
 * is that of its implementation (desc.h); an implementation this build does not know stays unnamed. */
static void v1_baseline(struct mok_row *row)
{
    if (row->speedup_baseline[0] || isnan(row->speedup))
        return;
    const struct mok_impl_desc *d = mok_impl_desc_find(row->impl);
    const char *mode = d && d->mode ? d->mode : "";
    const char *base = !strcmp(mode, "layer") ? "nccl" : !strcmp(mode, "comm") ? "nccl-p2p"
                       : !strcmp(mode, "gemm") ? "cublas-gemm" : "";
    snprintf(row->speedup_baseline, sizeof row->speedup_baseline, "%s", base);
}

/* The whole file as a NUL-terminated string (an empty file is ""). */
static char *read_file(const char *path, size_t *len_out, char *err, int err_len)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        mok_report_set_err(err, err_len, "cannot open %s: %s", path, strerror(errno));
        return NULL;
    }
    size_t len = 0, cap = 65536;
    char *buf = malloc(cap + 1);
    size_t n;
    while (buf && (n = fread(buf + len, 1, cap - len, f)) > 0) {
        len += n;
        if (len == cap) {
            char *bigger = realloc(buf, 2 * cap + 1);
            if (!bigger) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = bigger;
            cap *= 2;
        }
    }
    int bad = ferror(f);
    fclose(f);
    if (bad || !buf) {
        mok_report_set_err(err, err_len, "cannot read %s: %s", path, bad ? "read error" : "out of memory");
        free(buf);
        return NULL;
    }
    buf[len] = '\0';
    *len_out = len;
    return buf;
}

struct csv_reader {
    const char *p, *end;
    int line;  /* physical line of p, 1-based, for messages */
    char *buf; /* decoded cells of the current record, NUL-separated; sized so it cannot overflow */
    char **cells;
    int ncells, maxcells;
};

static int csv_at_eol(const struct csv_reader *r)
{
    const char *p = r->p;
    return p >= r->end || *p == '\n' || (*p == '\r' && (p + 1 == r->end || p[1] == '\n'));
}

/* One RFC 4180 record (quoted cells may span lines; CRLF or LF endings). 1: a record, 0: end, -1: error. */
static int csv_next(struct csv_reader *r, int *rec_line, const char *path, char *err, int err_len)
{
    while (r->p < r->end && (*r->p == '\n' || *r->p == '\r') && csv_at_eol(r)) /* blank lines */
        r->line += *r->p++ == '\n';
    if (r->p >= r->end)
        return 0;
    *rec_line = r->line;
    char *o = r->buf;
    for (r->ncells = 0;;) {
        if (r->ncells == r->maxcells)
            return mok_report_set_err(err, err_len, "%s:%d: more than %d columns", path, *rec_line, r->maxcells);
        r->cells[r->ncells++] = o;
        if (r->p < r->end && *r->p == '"') {
            int start = r->line;
            for (r->p++;; *o++ = *r->p++) {
                if (r->p >= r->end)
                    return mok_report_set_err(err, err_len, "%s:%d: quoted cell never closed", path, start);
                if (*r->p == '"' && (r->p + 1 == r->end || r->p[1] != '"'))
                    break;
                if (*r->p == '"') /* "" inside quotes: one literal quote */
                    r->p++;
                r->line += *r->p == '\n';
            }
            r->p++;
            if (!csv_at_eol(r) && *r->p != ',')
                return mok_report_set_err(err, err_len, "%s:%d: '%c' after a closing quote", path, r->line, *r->p);
        } else {
            while (!csv_at_eol(r) && *r->p != ',')
                *o++ = *r->p++;
        }
        *o++ = '\0';
        if (r->p < r->end && *r->p == ',') {
            r->p++;
            continue;
        }
        r->p += r->p < r->end && *r->p == '\r';
        if (r->p < r->end && *r->p == '\n') {
            r->p++;
            r->line++;
        }
        return 1;
    }
}

/* Stores text s (a CSV cell) into a row field. Empty means NaN for doubles; integers must be present. */
static int parse_cell(struct mok_row *row, const struct field *f, const char *s, const char *where, char *err,
                      int err_len)
{
    char *p = FIELD_PTR(row, f), *end = NULL;
    errno = 0;
    if (f->type == F_STR) {
        if (strlen(s) >= f->size)
            return mok_report_set_err(err, err_len, "%s: %s is longer than %zu characters", where, f->name, f->size - 1);
        memcpy(p, s, strlen(s) + 1);
        return 0;
    }
    if (f->type == F_DBL) {
        double v = *s ? strtod(s, &end) : NAN;
        /* ERANGE is kept: subnormals and huge values are values we wrote */
        if (!end || (!*end && (!errno || errno == ERANGE))) {
            *(double *)p = v;
            return 0;
        }
    } else if (f->type == F_INT) {
        long v = strtol(s, &end, 10);
        if (*s && !*end && !errno && v >= INT_MIN && v <= INT_MAX) {
            *(int *)p = (int)v;
            return 0;
        }
    } else {
        long long v = strtoll(s, &end, 10);
        if (*s && !*end && !errno) {
            *(long long *)p = v;
            return 0;
        }
    }
    return mok_report_set_err(err, err_len, "%s: %s = '%.40s' is not %s", where, f->name, s,
                   f->type == F_DBL ? "a number" : "an integer");
}

int mok_report_read_csv(const char *path, struct mok_row *rows, int max_rows, char *err, int err_len)
{
    size_t len;
    char *text = read_file(path, &len, err, err_len);
    if (!text)
        return -1;
    int count = -1, line, got, col[mok_report_nfields];
    struct csv_reader r = {text, text + len, 1, NULL, NULL, 0, 256};
    if (len >= 3 && memcmp(text, "\xEF\xBB\xBF", 3) == 0) /* a BOM, from a spreadsheet's re-save */
        r.p += 3;
    /* Decoded cells are never longer than their raw text, plus one NUL per cell: 2*len+2 always fits. */
    r.buf = malloc(2 * len + 2);
    r.cells = malloc((size_t)r.maxcells * sizeof *r.cells);
    if (!r.buf || !r.cells)
        FAIL("cannot read %s: out of memory", path);
    if ((got = csv_next(&r, &line, path, err, err_len)) <= 0) {
        if (got == 0)
            FAIL("%s: empty file, expected a header line", path);
        goto out;
    }
    int nhead = r.ncells, v1 = 0;
    for (int i = 0; i < mok_report_nfields; i++) {
        const struct field *f = &mok_report_fields[i];
        col[i] = -1;
        for (int c = 0; c < nhead; c++) {
            int is_v1 = f->v1_name && strcmp(r.cells[c], f->v1_name) == 0;
            if (strcmp(r.cells[c], f->name) != 0 && !is_v1)
                continue;
            if (col[i] >= 0) /* a file with both names is neither schema */
                FAIL("%s:%d: column %s appears twice%s", path, line, f->name, f->v1_name ? " (or as its schema 1 name)" : "");
            col[i] = c;
            v1 |= is_v1;
        }
        if (col[i] < 0 && f->required)
            FAIL("%s:%d: missing required column %s", path, line, f->name);
    }
    int n = 0;
    while ((got = csv_next(&r, &line, path, err, err_len)) > 0) {
        if (r.ncells != nhead)
            FAIL("%s:%d: %d cells, the header has %d", path, line, r.ncells, nhead);
        if (n >= max_rows)
            FAIL("%s: more than %d rows", path, max_rows);
        char where[PATH_MAX + 32];
        snprintf(where, sizeof where, "%s:%d", path, line);
        mok_row_init(&rows[n]);
        for (int i = 0; i < mok_report_nfields; i++)
            if (col[i] >= 0 && parse_cell(&rows[n], &mok_report_fields[i], r.cells[col[i]], where, err, err_len) != 0)
                goto out;
        if (v1)
            v1_baseline(&rows[n]);
        n++;
    }
    if (got == 0)
        count = n;
out:
    free(r.buf);
    free(r.cells);
    free(text);
    return count;
}

/* ---- JSON ------------------------------------------------------------------------------------------ */

/* cJSON 1.7.15 prints a double with 15 digits whenever that reads back within one DBL_EPSILON, which is not
 * exact (0.1+0.2 comes out as 0.3). So numbers go in as raw text from fmt_exact. JSON has no NaN or
 * infinity: both become null (an infinity reads back as NaN; the CSV keeps it). */

static int json_field(struct mok_row *row, const struct field *f, const cJSON *item, const char *where,
                      char *err, int err_len)
{
    char *p = FIELD_PTR(row, f);
    if (f->type == F_STR) {
        if (!cJSON_IsString(item))
            return mok_report_set_err(err, err_len, "%s.%s: expected a string", where, f->name);
        return parse_cell(row, f, item->valuestring, where, err, err_len);
    }
    if (f->type == F_DBL && cJSON_IsNull(item)) {
        *(double *)p = NAN;
        return 0;
    }
    if (!cJSON_IsNumber(item))
        return mok_report_set_err(err, err_len, "%s.%s: expected a number%s", where, f->name, f->type == F_DBL ? " or null" : "");
    double v = item->valuedouble;
    double lim = f->type == F_INT ? (double)INT_MAX : 9007199254740992.0; /* 2^53: exact in a double */
    if (f->type == F_DBL)
        *(double *)p = v;
    else if (v != floor(v) || v > lim || v < -lim - (f->type == F_INT))
        return mok_report_set_err(err, err_len, "%s.%s = %.17g is not an integer in range", where, f->name, v);
    else if (f->type == F_INT)
        *(int *)p = (int)v;
    else
        *(long long *)p = (long long)v;
    return 0;
}

int mok_report_read_json(const char *path, struct mok_row *rows, int max_rows, char *err, int err_len)
{
    size_t len;
    char *text = read_file(path, &len, err, err_len);
    if (!text)
        return -1;
    int count = -1, n = 0;
    const cJSON *o;
    cJSON *root = cJSON_ParseWithLength(text, len);
    if (!root) {
        const char *at = cJSON_GetErrorPtr();
        FAIL("%s: not valid JSON (near byte %ld)", path, at && at >= text && at <= text + len ? (long)(at - text) : -1L);
    }
    const cJSON *ver = cJSON_GetObjectItemCaseSensitive(root, "schema_version");
    if (!cJSON_IsNumber(ver))
        FAIL("%s: no schema_version; not a mok-bench report", path);
    if (ver->valuedouble > MOK_REPORT_SCHEMA_VERSION)
        FAIL("%s: schema_version %g is newer than this reader's (%d)", path, ver->valuedouble,
             MOK_REPORT_SCHEMA_VERSION);
    if (ver->valuedouble < 1 || ver->valuedouble != floor(ver->valuedouble))
        FAIL("%s: schema_version %g is not a version of this format (1, 2, ...)", path, ver->valuedouble);
    int v1 = ver->valuedouble == 1;
    const cJSON *arr = cJSON_GetObjectItemCaseSensitive(root, "rows");
    if (!cJSON_IsArray(arr))
        FAIL("%s: rows is missing or not an array", path);
    cJSON_ArrayForEach(o, arr)
    {
        char where[PATH_MAX + 32];
        snprintf(where, sizeof where, "%s: rows[%d]", path, n);
        if (!cJSON_IsObject(o))
            FAIL("%s: expected an object", where);
        if (n >= max_rows)
            FAIL("%s: more than %d rows", path, max_rows);
        mok_row_init(&rows[n]);
        for (int i = 0; i < mok_report_nfields; i++) {
            const struct field *f = &mok_report_fields[i];
            /* schema 1 names only in schema 1 files: a v2 file's row is read by v2 names alone */
            const cJSON *item = cJSON_GetObjectItemCaseSensitive(o, v1 && f->v1_name ? f->v1_name : f->name);
            if (!item && f->required)
                FAIL("%s: missing required key %s", where, f->name);
            if (item && json_field(&rows[n], f, item, where, err, err_len) != 0)
                goto out;
        }
        if (v1)
            v1_baseline(&rows[n]);
        n++;
    }
    count = n;
out:
    cJSON_Delete(root);
    free(text);
    return count;
}
