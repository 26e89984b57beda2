/* report: the '#' header, the live table and the CSV/JSON files. One table of row fields drives the CSV
 * columns, the JSON keys and both readers, so the four can never disagree on a name or an order. */
#include "report.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

extern char **environ;

#include "report_fields.h"

#define FLD(m, t, req) {#m, t, offsetof(struct mok_row, m), sizeof(((struct mok_row *)0)->m), req, 0, NULL}
#define FI(m) FLD(m, F_INT, 0)
#define FD(m) FLD(m, F_DBL, 0)
#define FS(m) FLD(m, F_STR, 0)
#define FT(m) {#m, F_DBL, offsetof(struct mok_row, m), sizeof(((struct mok_row *)0)->m), 0, 1, NULL}
/* renamed in schema 2: the schema 1 name stays readable */
#define FD_V1(m, old) {#m, F_DBL, offsetof(struct mok_row, m), sizeof(((struct mok_row *)0)->m), 0, 0, old}
const struct field mok_report_fields[] = {
    FLD(problem, F_INT, 1), FS(model), FI(hidden), FI(intermediate), FI(experts), FI(topk), FI(shared_experts),
    FI(tokens_per_rank), FS(routing), FS(dtype), FS(pass), FLD(impl, F_STR, 1), FLD(params, F_STR, 1),
    FS(disposition), FD(max_rel_err), FD(norm_rel_err), FLD(bad_count, F_LL, 0), FLD(nan_count, F_LL, 0),
    FI(iters),
    {"time_med_us", F_DBL, offsetof(struct mok_row, time_med_us), sizeof(double), 1, 1, NULL},
    FT(time_p10_us), FT(time_p90_us), FD(flops), FD(tflops),
    FD(dispatch_bytes), FD(combine_bytes), FD(comm_gbps), FD_V1(speedup, "speedup_vs_nccl"), FT(dispatch_us),
    FD(dispatch_gbps), FT(dispatch_alone_us), FT(combine_us), FD(comm_sms), FD(peer_frac), FT(gemm_us),
    FT(gemm_alone_us), FT(a2a_ref_us), FD(a2a_ref_gbps), FS(note), FT(gemm1_us), FT(gemm2_us), FD(gemm_frac),
    FD(energy_j), FD(power_w), FD_V1(power_capped_share, "power_capped"), FS(inputs),
    /* schema 2 */
    FS(speedup_baseline), FT(exposed_comm_us), FS(mode), FD(capacity_factor), FD(warmup), FD(warmup_ms), FD(seed),
    FS(run_start), FS(y_check), FD(y_max_rel_err), FS(dx_check), FD(dx_max_rel_err), FS(dw13_check),
    FD(dw13_max_rel_err), FS(dw2_check), FD(dw2_max_rel_err), FS(d_router_check), FD(d_router_max_rel_err),
    FD(roofline_bytes), FT(roofline_mem_us), FT(roofline_gemm_us), FT(roofline_us), FD(time_over_roofline),
    FS(wgrad),
    /* schema 4 */
    FS(h_check), FD(h_max_rel_err),
    /* schema 5 */
    FD(roofline_grad_bytes),
    /* schema 6 */
    FD(y_bf16_ref_err),
};
const int mok_report_nfields = (int)(sizeof mok_report_fields / sizeof mok_report_fields[0]);


void mok_row_init(struct mok_row *row)
{
    memset(row, 0, sizeof *row);
    for (int i = 0; i < mok_report_nfields; i++)
        if (mok_report_fields[i].type == F_DBL)
            *(double *)FIELD_PTR(row, &mok_report_fields[i]) = NAN;
}

void mok_row_note_prepend(struct mok_row *row, const char *first)
{
    const size_t cap = sizeof row->note, n = strlen(first);
    size_t used = strlen(row->note), sep = used ? 2 : 0;
    if (n + 1 > cap)
        return;
    if (n + sep + used + 1 > cap) /* the old note's end goes */
        used = n + sep + 1 < cap ? cap - 1 - n - sep : 0;
    if (!used)
        sep = 0;
    memmove(row->note + n + sep, row->note, used);
    row->note[n + sep + used] = '\0';
    memcpy(row->note, first, n);
    if (sep)
        memcpy(row->note + n, "; ", 2);
}

int mok_row_set_output(struct mok_row *row, const char *name, const char *verdict, double max_rel_err)
{
    static const struct {
        const char *name;
        size_t check, err;
    } cols[] = {
        {"y", offsetof(struct mok_row, y_check), offsetof(struct mok_row, y_max_rel_err)},
        {"dx", offsetof(struct mok_row, dx_check), offsetof(struct mok_row, dx_max_rel_err)},
        {"dw13", offsetof(struct mok_row, dw13_check), offsetof(struct mok_row, dw13_max_rel_err)},
        {"dw2", offsetof(struct mok_row, dw2_check), offsetof(struct mok_row, dw2_max_rel_err)},
        {"d_router", offsetof(struct mok_row, d_router_check), offsetof(struct mok_row, d_router_max_rel_err)},
        {"h", offsetof(struct mok_row, h_check), offsetof(struct mok_row, h_max_rel_err)},
    };
    for (size_t i = 0; i < sizeof cols / sizeof cols[0]; i++)
        if (!strcmp(cols[i].name, name)) {
            snprintf((char *)row + cols[i].check, sizeof row->y_check, "%s", verdict);
            *(double *)((char *)row + cols[i].err) = max_rel_err;
            return 0;
        }
    return -1;
}

/* Formats the message into err; returns -1 so error paths read "return mok_report_set_err(...)". */
int mok_report_set_err(char *err, int err_len, const char *fmt, ...)
{
    if (err && err_len > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, (size_t)err_len, fmt, ap);
        va_end(ap);
    }
    return -1;
}
#define FAIL(...)                                                                                            \
    do {                                                                                                     \
        mok_report_set_err(err, err_len, __VA_ARGS__);                                                        \
        goto out;                                                                                            \
    } while (0)

/* Shortest of %.15g/%.16g/%.17g that reads back to the same bits: exact like %.17g, but 0.1 stays "0.1"
 * rather than "0.10000000000000001" for whoever opens the file. Non-finite values are the caller's job. */
void mok_report_fmt_exact(char *buf, size_t len, double v)
{
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(buf, len, "%.*g", prec, v);
        if (prec == 17 || strtod(buf, NULL) == v)
            return;
    }
}

/* Decimals so the last digit is the finer of the unit's 0.1 us (min_decimals) and the 4th significant digit: a
 * 6898.5 us layer keeps its 0.1 us, a 5.123 us dispatch its 4 digits, and neither carries the 17 digits of timer
 * noise an exact double would. Rounding is printf's (to nearest). */
void mok_report_fmt_time(char *buf, size_t len, double v, int min_decimals)
{
    if (isnan(v)) {
        snprintf(buf, len, "%s", "");
        return;
    }
    int dec = min_decimals;
    if (isfinite(v) && v != 0) {
        int sig = 3 - (int)floor(log10(fabs(v))); /* decimals of the 4th significant digit */
        dec = sig > dec ? sig : dec;
    }
    if (dec > 12) /* below 1e-9 of the unit: no fixed notation keeps 4 digits in a cell of sensible width */
        snprintf(buf, len, "%.3e", v);
    else if (!isfinite(v) || fabs(v) >= 1e12) /* a broken timer: exact, rather than hundreds of digits */
        mok_report_fmt_exact(buf, len, v);
    else
        snprintf(buf, len, "%.*f", dec, v);
}

/* ---- growable text buffer: a whole file is built in memory, then written atomically in one go --------- */

struct sbuf {
    char *p;
    size_t len, cap;
    int oom;
};

static void sb_putn(struct sbuf *b, const char *s, size_t n)
{
    if (b->oom)
        return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->oom = 1;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

static void sb_puts(struct sbuf *b, const char *s) { sb_putn(b, s, strlen(s)); }

/* ---- console output --------------------------------------------------------------------------------- */

void mok_report_print_header(FILE *out, const struct mok_env *env, const char *config_source)
{
    fprintf(out, "# mok-bench %s (commit %s)\n", env->mok_version, env->commit);
    fprintf(out, "# CUDA runtime %s driver %s | NCCL %s | MPI %s\n", env->cuda_runtime, env->cuda_driver,
            env->nccl, env->mpi);
    fprintf(out, "# config %s\n", config_source ? config_source : "-");
    if (env->lsa_size > 0)
        fprintf(out, "# ranks %d | LSA team size %d\n", env->nranks, env->lsa_size);
    else
        fprintf(out, "# ranks %d | LSA team size unknown\n", env->nranks);
    if (env->probe_bidir_gbps > 0 || env->probe_gemm_tflops > 0)
        fprintf(out, "# probe (this run): peer push %.0f GB/s, pull %.0f GB/s, both directions %.0f GB/s per "
                     "direction; dense bf16 GEMM %.0f TFLOP/s at the power cap (fp8_block %.0f); DRAM read %.0f GB/s (%s)\n",
                env->probe_push_gbps, env->probe_pull_gbps, env->probe_bidir_gbps, env->probe_gemm_tflops,
                env->probe_gemm_fp8_tflops, env->probe_dram_gbps, env->probe_dram_shape);
    int n = env->nrank_info < MOK_MAX_RANKS ? env->nrank_info : MOK_MAX_RANKS;
    for (int i = 0; i < n; i++) {
        const struct mok_rank_info *r = &env->ranks[i];
        if (r->device >= 0)
            fprintf(out, "#  rank %d pid %d host %s device %d [%s] %d SMs\n", r->rank, r->pid, r->host,
                    r->device, r->gpu, r->sm_count);
        else
            fprintf(out, "#  rank %d pid %d host %s no GPU\n", r->rank, r->pid, r->host);
    }
    fprintf(out, "#\n");
    fflush(out);
}

/* Widths chosen so a row stays under ~200 columns. Strings wider than their column are printed whole (the
 * row shifts right) rather than cut: two candidates whose params differ only at the end must stay
 * distinguishable on screen. */
#define TABLE_FMT "%5s %-16s %7s %-14s %-5s %-4s %-12s %-28s %-13s %10s %10s %10s %8s %8s %7s %11s %8s"

void mok_report_print_table_head(FILE *out)
{
    fprintf(out, "#" TABLE_FMT "\n", "prob", "model", "tokens", "routing", "dtype", "pass", "impl", "params",
            "disposition", "med_us", "p10_us", "p90_us", "TFLOP/s", "GB/s", "speedup", "max_rel_err", "bad");
    fflush(out);
}

/* Times on screen: two decimals, more where 4 significant digits need them (a 5.123 us dispatch). */
static const char *time_num(char *buf, size_t len, int width, double v)
{
    if (isnan(v))
        return "-";
    mok_report_fmt_time(buf, len, v, 2);
    if ((int)strlen(buf) > width)
        snprintf(buf, len, "%.3e", v);
    return buf;
}

/* "-" for a figure that does not apply, as nccl-tests does for skipped checks. A value too wide for its
 * column in fixed notation (a broken timer, a huge count) switches to exponent form to keep alignment. */
static const char *num(char *buf, size_t len, int width, int prec, double v)
{
    if (isnan(v))
        return "-";
    if (snprintf(buf, len, "%.*f", prec, v) > width)
        snprintf(buf, len, "%.*e", width >= 10 ? 3 : 1, v);
    return buf;
}

void mok_report_print_row(FILE *out, const struct mok_row *row)
{
    char prob[16], tok[16], med[320], p10[320], p90[320], tf[320], gbps[320], sp[320], err[32], bad[32];
    snprintf(prob, sizeof prob, "%d", row->problem);
    snprintf(tok, sizeof tok, "%d", row->tokens_per_rank);
    snprintf(err, sizeof err, "%.2e", row->max_rel_err);
    /* A bad count means something only when the output was compared; without an error figure
     * (not_verified, failed, not_supported) the 0 from mok_row_init would read as "all good". */
    snprintf(bad, sizeof bad, "%lld", row->bad_count);
    fprintf(out, " " TABLE_FMT, prob, row->model, tok, row->routing, row->dtype, row->pass, row->impl,
            row->params[0] ? row->params : "-", row->disposition, time_num(med, sizeof med, 10, row->time_med_us),
            time_num(p10, sizeof p10, 10, row->time_p10_us), time_num(p90, sizeof p90, 10, row->time_p90_us),
            num(tf, sizeof tf, 8, 2, row->tflops), num(gbps, sizeof gbps, 8, 1, row->comm_gbps),
            num(sp, sizeof sp, 7, 3, row->speedup), /* three decimals, as the summary */
            isnan(row->max_rel_err) ? "-" : err,
            isnan(row->max_rel_err) ? "-" : bad);
    /* The note (why a candidate failed or was skipped) goes last, flattened to one line so the table keeps
     * one line per candidate. */
    if (row->note[0]) {
        fputs("  # ", out);
        for (const char *s = row->note; *s; s++)
            fputc((unsigned char)*s < 0x20 ? ' ' : *s, out);
    }
    fputc('\n', out);
    fflush(out); /* rows appear as candidates finish, also when stdout is a pipe to tee */
}

/* ---- output paths and atomic writes ------------------------------------------------------------------ */

int mok_mkdir_p(const char *dir, char *err, int err_len)
{
    char buf[PATH_MAX];
    if (snprintf(buf, sizeof buf, "%s", dir) >= (int)sizeof buf)
        return mok_report_set_err(err, err_len, "output directory name too long: %s", dir);
    /* Create each prefix in turn; EEXIST on the way is fine, the final stat decides. */
    for (char *s = buf + 1;; s++) {
        char c = *s;
        if (c != '/' && c != '\0')
            continue;
        *s = '\0';
        if (mkdir(buf, 0777) != 0 && errno != EEXIST)
            return mok_report_set_err(err, err_len, "cannot create directory %s: %s", buf, strerror(errno));
        *s = c;
        if (!c)
            break;
    }
    struct stat st;
    if (stat(buf, &st) != 0)
        return mok_report_set_err(err, err_len, "cannot access output directory %s: %s", buf, strerror(errno));
    if (!S_ISDIR(st.st_mode))
        return mok_report_set_err(err, err_len, "output directory %s exists and is not a directory", buf);
    return 0;
}

/* 1 if anything (even a dangling symlink, on which link(2) would fail later) is at path, 0 if not. */
static int path_exists(const char *path, char *err, int err_len)
{
    struct stat st;
    if (lstat(path, &st) == 0)
        return 1;
    return errno == ENOENT ? 0 : mok_report_set_err(err, err_len, "cannot check %s: %s", path, strerror(errno));
}

int mok_report_choose_paths(const char *dir, const char *name, char *csv_path, char *json_path, int path_len,
                            char *err, int err_len)
{
    if (!dir || !dir[0])
        dir = ".";
    if (!name || !name[0] || strchr(name, '/'))
        return mok_report_set_err(err, err_len, "invalid output name '%s': must be non-empty, without '/'", name ? name : "");
    if (mok_mkdir_p(dir, err, err_len) != 0)
        return -1;
    int dlen = (int)strlen(dir);
    while (dlen > 1 && dir[dlen - 1] == '/') /* "out/" + "x.csv" reads better as "out/x.csv" */
        dlen--;
    const char *sep = (dlen == 1 && dir[0] == '/') ? "" : "/";
    /* A bound keeps a directory full of old reports (or a bug) from looping forever. */
    for (int i = 0; i < 100000; i++) {
        char sfx[16] = "";
        if (i > 0)
            snprintf(sfx, sizeof sfx, "-%d", i);
        int a = snprintf(csv_path, (size_t)path_len, "%.*s%s%s%s.csv", dlen, dir, sep, name, sfx);
        int b = snprintf(json_path, (size_t)path_len, "%.*s%s%s%s.json", dlen, dir, sep, name, sfx);
        if (a < 0 || b < 0 || a >= path_len || b >= path_len)
            return mok_report_set_err(err, err_len, "output path %.*s%s%s%s.json is too long", dlen, dir, sep, name, sfx);
        char sum_path[PATH_MAX];
        if (mok_report_summary_path(csv_path, sum_path, (int)sizeof sum_path) != 0)
            return mok_report_set_err(err, err_len, "output path %s is too long", csv_path);
        int c = path_exists(csv_path, err, err_len);
        int j = c ? c : path_exists(json_path, err, err_len);
        int m = c || j ? 0 : path_exists(sum_path, err, err_len);
        if (c < 0 || j < 0 || m < 0)
            return -1;
        if (!c && !j && !m)
            return 0;
    }
    return mok_report_set_err(err, err_len, "no free report name %s-N in %s", name, dir);
}

int mok_report_summary_path(const char *csv_path, char *out, int len)
{
    size_t n = strlen(csv_path);
    if (n >= 4 && strcmp(csv_path + n - 4, ".csv") == 0)
        n -= 4;
    int w = snprintf(out, (size_t)len, "%.*s.summary.csv", (int)n, csv_path);
    return w < 0 || w >= len ? -1 : 0;
}

/* Makes the new directory entry durable too: without it a crash right after a run could lose a report whose
 * data was fsynced. Best effort: some file systems refuse fsync on directories. */
static void fsync_parent(const char *path)
{
    char dir[PATH_MAX] = ".";
    const char *slash = strrchr(path, '/');
    if (slash && (size_t)(slash - path) < sizeof dir)
        snprintf(dir, sizeof dir, "%.*s", slash == path ? 1 : (int)(slash - path), path);
    int fd = open(dir, O_RDONLY | O_DIRECTORY);
    if (fd >= 0) {
        (void)fsync(fd);
        close(fd);
    }
}

int mok_write_file_atomic(const char *path, const char *data, size_t len, char *err, int err_len)
{
    /* The temp file sits next to the target so link(2) stays within one file system; pid and random suffix
     * keep ranks or concurrent runs sharing a directory apart. */
    char tmp[PATH_MAX];
    if (snprintf(tmp, sizeof tmp, "%s.tmp.%ld.XXXXXX", path, (long)getpid()) >= (int)sizeof tmp)
        return mok_report_set_err(err, err_len, "path too long: %s", path);
    int fd = mkstemp(tmp);
    if (fd < 0)
        return mok_report_set_err(err, err_len, "cannot create a temporary file for %s: %s", path, strerror(errno));
    int rc = -1;
    (void)fchmod(fd, 0644); /* mkstemp makes it 0600; a report is meant to be shared like any output */
    for (size_t off = 0; off < len;) {
        ssize_t w = write(fd, data + off, len - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            FAIL("cannot write %s (for %s): %s", tmp, path, strerror(errno));
        off += (size_t)w;
    }
    /* Data on disk before the name appears: an interrupted run leaves either no report or a whole one. */
    if (fsync(fd) != 0)
        FAIL("cannot fsync %s (for %s): %s", tmp, path, strerror(errno));
    int c = close(fd);
    fd = -1;
    if (c != 0)
        FAIL("cannot close %s (for %s): %s", tmp, path, strerror(errno));
    /* link(2), unlike rename(2), fails when the target exists: an old report is never replaced. */
    if (link(tmp, path) != 0) {
        if (errno == EEXIST)
            FAIL("refusing to overwrite %s", path);
        FAIL("cannot create %s: %s", path, strerror(errno));
    }
    fsync_parent(path);
    rc = 0;
out:
    if (fd >= 0)
        close(fd);
    unlink(tmp);
    return rc;
}

/* Writes a built buffer, or reports that building it ran out of memory; frees it either way. */
static int write_sbuf(const char *path, struct sbuf *b, char *err, int err_len)
{
    int rc = b->oom ? mok_report_set_err(err, err_len, "out of memory building %s", path)
                    : mok_write_file_atomic(path, b->p ? b->p : "", b->len, err, err_len);
    free(b->p);
    return rc;
}

/* ---- CSV ------------------------------------------------------------------------------------------- */

/* RFC 4180: quote when the text holds a separator, a quote or a line break; double inner quotes. */
static void csv_str(struct sbuf *b, const char *s)
{
    if (!strpbrk(s, ",\"\r\n")) {
        sb_puts(b, s);
        return;
    }
    sb_putn(b, "\"", 1);
    for (const char *q; (q = strchr(s, '"')); s = q + 1) {
        sb_putn(b, s, (size_t)(q - s + 1));
        sb_putn(b, "\"", 1);
    }
    sb_puts(b, s);
    sb_putn(b, "\"", 1);
}

void mok_report_csv_cell(FILE *out, const char *s)
{
    struct sbuf b = {0};
    csv_str(&b, s);
    if (b.p)
        fputs(b.p, out);
    free(b.p);
}

static void csv_field(struct sbuf *b, const struct mok_row *row, const struct field *f, int exact)
{
    char buf[64] = "";
    const char *p = FIELD_CPTR(row, f);
    if (f->type == F_STR)
        csv_str(b, p);
    else if (f->type == F_INT)
        snprintf(buf, sizeof buf, "%d", *(const int *)p);
    else if (f->type == F_LL)
        snprintf(buf, sizeof buf, "%lld", *(const long long *)p);
    else if (isnan(*(const double *)p)) /* NaN: an empty cell, which pandas and spreadsheets read as missing */
        buf[0] = '\0';
    else if (f->time_us && !exact) /* the JSON report keeps the exact time */
        mok_report_fmt_time(buf, sizeof buf, *(const double *)p, 1);
    else
        mok_report_fmt_exact(buf, sizeof buf, *(const double *)p);
    sb_puts(b, buf);
}

const char *const mok_report_env_columns[] = {"gpu",         "sm_count", "ranks", "lsa_size", "cuda_runtime",
                                             "cuda_driver", "nccl",     "mpi",   "mok_version", "commit", NULL};

char *mok_report_csv_text(const struct mok_env *env, const struct mok_row *rows, int nrows, int flags)
{
    static const struct mok_env no_env;
    if (!env)
        env = &no_env;
    struct sbuf b = {0};
    if (flags & MOK_CSV_HEADER) {
        for (int i = 0; i < mok_report_nfields; i++) {
            sb_puts(&b, mok_report_fields[i].name);
            sb_putn(&b, ",", 1);
        }
        for (int i = 0; mok_report_env_columns[i]; i++) {
            sb_puts(&b, mok_report_env_columns[i]);
            sb_putn(&b, mok_report_env_columns[i + 1] ? "," : "\n", 1);
        }
    }
    /* The environment repeats on every row so rows from many runs can be concatenated and still compared. */
    char ints[48];
    snprintf(ints, sizeof ints, ",%d,%d,%d", env->sm_count, env->nranks, env->lsa_size);
    const char *strs[] = {env->cuda_runtime, env->cuda_driver, env->nccl, env->mpi, env->mok_version, env->commit};
    for (int r = 0; r < nrows; r++) {
        for (int i = 0; i < mok_report_nfields; i++) {
            csv_field(&b, &rows[r], &mok_report_fields[i], flags & MOK_CSV_EXACT);
            sb_putn(&b, ",", 1);
        }
        csv_str(&b, env->gpu);
        sb_puts(&b, ints);
        for (int i = 0; i < 6; i++) {
            sb_putn(&b, ",", 1);
            csv_str(&b, strs[i]);
        }
        sb_putn(&b, "\n", 1);
    }
    if (b.oom) {
        free(b.p);
        return NULL;
    }
    if (!b.p) /* nothing written: an empty string, not NULL */
        return calloc(1, 1);
    return b.p;
}

int mok_report_write_csv(const char *path, const struct mok_env *env, const struct mok_row *rows, int nrows,
                         char *err, int err_len)
{
    char *text = mok_report_csv_text(env, rows, nrows, MOK_CSV_HEADER);
    if (!text)
        return mok_report_set_err(err, err_len, "%s: out of memory", path);
    int rc = mok_write_file_atomic(path, text, strlen(text), err, err_len);
    free(text);
    return rc;
}

static cJSON *json_num(double v)
{
    char buf[64];
    if (!isfinite(v))
        return cJSON_CreateNull();
    mok_report_fmt_exact(buf, sizeof buf, v);
    return cJSON_CreateRaw(buf);
}

/* Adds item to obj (an array when name is NULL), remembering a failed allocation in *ok so that a
 * document with silently missing keys is never written. */
static void jadd(cJSON *obj, const char *name, cJSON *item, int *ok)
{
    if (!item || !obj) {
        cJSON_Delete(item);
        *ok = 0;
    } else if (name) {
        cJSON_AddItemToObject(obj, name, item);
    } else {
        cJSON_AddItemToArray(obj, item);
    }
}

static cJSON *env_json(const struct mok_env *env, int *ok)
{
    cJSON *e = cJSON_CreateObject();
    const char *keys[] = {"mok_version", "commit", "cuda_runtime", "cuda_driver", "nccl", "mpi", "gpu"};
    const char *vals[] = {env->mok_version, env->commit, env->cuda_runtime, env->cuda_driver,
                          env->nccl,        env->mpi,    env->gpu};
    for (int i = 0; i < 7; i++)
        jadd(e, keys[i], cJSON_CreateString(vals[i]), ok);
    jadd(e, "sm_count", cJSON_CreateNumber(env->sm_count), ok);
    jadd(e, "nranks", cJSON_CreateNumber(env->nranks), ok); /* "ranks" is the per-rank list below */
    jadd(e, "lsa_size", cJSON_CreateNumber(env->lsa_size), ok);
    if (env->probe_bidir_gbps > 0 || env->probe_gemm_tflops > 0) { /* ceilings of this run, from --probe */
        cJSON *pr = cJSON_CreateObject();
        jadd(pr, "peer_push_gbps", cJSON_CreateNumber(env->probe_push_gbps), ok);
        jadd(pr, "peer_pull_gbps", cJSON_CreateNumber(env->probe_pull_gbps), ok);
        jadd(pr, "peer_bidir_gbps_per_direction", cJSON_CreateNumber(env->probe_bidir_gbps), ok);
        jadd(pr, "gemm_bf16_tflops", cJSON_CreateNumber(env->probe_gemm_tflops), ok);
        jadd(pr, "gemm_fp8_block_tflops", env->probe_gemm_fp8_tflops > 0 ? cJSON_CreateNumber(env->probe_gemm_fp8_tflops)
                                                                         : cJSON_CreateNull(), ok);
        jadd(pr, "gemm_fp8_tensor_tflops", env->probe_gemm_fp8_tensor_tflops > 0
                                               ? cJSON_CreateNumber(env->probe_gemm_fp8_tensor_tflops)
                                               : cJSON_CreateNull(), ok);
        jadd(pr, "dram_read_gbps", cJSON_CreateNumber(env->probe_dram_gbps), ok);
        jadd(pr, "dram_read_shape", cJSON_CreateString(env->probe_dram_shape), ok);
        jadd(e, "probe", pr, ok);
    }
    cJSON *ranks = cJSON_CreateArray();
    int n = env->nrank_info < MOK_MAX_RANKS ? env->nrank_info : MOK_MAX_RANKS;
    for (int i = 0; i < n && ranks; i++) {
        const struct mok_rank_info *r = &env->ranks[i];
        cJSON *o = cJSON_CreateObject();
        jadd(o, "rank", cJSON_CreateNumber(r->rank), ok);
        jadd(o, "pid", cJSON_CreateNumber(r->pid), ok);
        jadd(o, "host", cJSON_CreateString(r->host), ok);
        jadd(o, "device", cJSON_CreateNumber(r->device), ok);
        jadd(o, "gpu", cJSON_CreateString(r->gpu), ok);
        jadd(o, "sm_count", cJSON_CreateNumber(r->sm_count), ok);
        jadd(ranks, NULL, o, ok);
    }
    jadd(e, "ranks", ranks, ok);
    /* NCCL_* settings change what NCCL does (protocols, channels, P2P levels); without them a number cannot
     * be reproduced. The first occurrence wins, as with getenv. */
    cJSON *nccl = cJSON_CreateObject();
    for (char **v = environ; v && *v && nccl; v++) {
        const char *eq = strchr(*v, '=');
        char name[256];
        if (strncmp(*v, "NCCL_", 5) != 0 || !eq || eq - *v >= (long)sizeof name)
            continue;
        memcpy(name, *v, (size_t)(eq - *v));
        name[eq - *v] = '\0';
        if (!cJSON_GetObjectItemCaseSensitive(nccl, name))
            jadd(nccl, name, cJSON_CreateString(eq + 1), ok);
    }
    jadd(e, "nccl_environment", nccl, ok);
    return e;
}

static cJSON *row_json(const struct mok_row *row, int *ok)
{
    cJSON *o = cJSON_CreateObject();
    for (int i = 0; i < mok_report_nfields && o; i++) {
        const struct field *f = &mok_report_fields[i];
        const char *p = FIELD_CPTR(row, f);
        jadd(o, f->name,
             f->type == F_INT ? cJSON_CreateNumber(*(const int *)p)
             : f->type == F_LL ? json_num((double)*(const long long *)p) /* exact up to 2^53 */
             : f->type == F_DBL ? json_num(*(const double *)p)
                                : cJSON_CreateString(p),
             ok);
    }
    return o;
}

int mok_report_write_json(const char *path, int argc, char **argv, const char *config_json,
                          const struct mok_env *env, const struct mok_row *rows, int nrows, const char *summary_json,
                          char *err, int err_len)
{
    static const struct mok_env no_env;
    int ok = 1;
    cJSON *root = cJSON_CreateObject();
    jadd(root, "schema_version", cJSON_CreateNumber(MOK_REPORT_SCHEMA_VERSION), &ok);
    jadd(root, "tool", cJSON_CreateString("mok-bench"), &ok);
    cJSON *args = cJSON_CreateArray();
    for (int i = 0; i < argc && argv && argv[i] && args; i++)
        jadd(args, NULL, cJSON_CreateString(argv[i]), &ok);
    jadd(root, "argv", args, &ok);
    jadd(root, "env", env_json(env ? env : &no_env, &ok), &ok);
    /* Embedded as an object so tools can query it; text that does not parse (it should not happen) is kept
     * verbatim as a string rather than lost. */
    cJSON *cfg = config_json ? cJSON_Parse(config_json) : NULL;
    if (!cfg)
        cfg = config_json ? cJSON_CreateString(config_json) : cJSON_CreateNull();
    jadd(root, "config", cfg, &ok);
    cJSON *arr = cJSON_CreateArray();
    for (int r = 0; r < nrows && arr; r++)
        jadd(arr, NULL, row_json(&rows[r], &ok), &ok);
    jadd(root, "rows", arr, &ok);
    if (summary_json) { /* the capacity-planning summary, built by summary.c */
        cJSON *sum = cJSON_Parse(summary_json);
        jadd(root, "summary", sum ? sum : cJSON_CreateString(summary_json), &ok);
    }
    char stamp[32] = "";
    time_t now = time(NULL);
    struct tm tm;
    if (gmtime_r(&now, &tm))
        strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%SZ", &tm);
    jadd(root, "created_utc", cJSON_CreateString(stamp), &ok);

    char *text = ok && root ? cJSON_Print(root) : NULL;
    cJSON_Delete(root);
    struct sbuf b = {.oom = !text};
    if (text) {
        sb_puts(&b, text);
        sb_putn(&b, "\n", 1);
        cJSON_free(text);
    }
    return write_sbuf(path, &b, err, err_len);
}

