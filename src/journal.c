/* journal: the append-only record of finished rows (see journal.h). */
#include "journal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_RESUMED 100000

static int fail(char *err, int err_len, const char *what, const char *path)
{
    snprintf(err, (size_t)err_len, "journal %s: %s: %s", what, path, strerror(errno));
    return -1;
}

static bool same_identity(const char *id_path, const char *identity)
{
    FILE *f = fopen(id_path, "r");
    if (!f)
        return false;
    char buf[1024] = "";
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    return strcmp(buf, identity) == 0;
}

/* 1 if the journal's first line is this version's CSV header. */
static bool same_header(const char *path, const struct mok_env *env)
{
    char *head = mok_report_csv_text(env, NULL, 0, MOK_CSV_HEADER);
    FILE *f = fopen(path, "r");
    bool same = false;
    if (head && f) {
        size_t n = strlen(head);
        char *line = malloc(n + 1);
        same = line && fread(line, 1, n, f) == n && memcmp(line, head, n) == 0;
        free(line);
    }
    if (f)
        fclose(f);
    free(head);
    return same;
}

/* A row cut off by a kill mid-write leaves the journal without its final newline: the partial line goes (nothing
 * of it was a whole row), so that the rows before it can be read and appended to. Returns 1 if one went. */
static int drop_torn_line(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return 0;
    long keep = -1, size = 0;
    for (int c; (c = fgetc(f)) != EOF; size++)
        if (c == '\n')
            keep = size + 1;
    fclose(f);
    if (size == 0 || keep == size)
        return 0;
    return truncate(path, keep < 0 ? 0 : keep) == 0;
}

/* A journal about to be started over while it holds rows moves aside first, with its id, to the first free
 * <path>.old, .old2, ...: its rows were measured, and nothing measured is dropped. Names the move in note. */
static int move_aside(const char *path, const char *id_path, char *note, int note_len, char *err, int err_len)
{
    struct stat st;
    if (stat(path, &st) != 0 || st.st_size == 0)
        return 0;
    FILE *f = fopen(path, "r");
    int lines = 0;
    for (int c; f && (c = fgetc(f)) != EOF && lines < 2;)
        lines += c == '\n';
    if (f)
        fclose(f);
    if (lines <= 1) /* nothing but its header: no rows to keep */
        return 0;
    char to[700], id_to[700];
    for (int k = 1; k < 1000; k++) {
        snprintf(to, sizeof to, k == 1 ? "%s.old" : "%s.old%d", path, k);
        if (access(to, F_OK) == 0)
            continue;
        snprintf(id_to, sizeof id_to, k == 1 ? "%s.old" : "%s.old%d", id_path, k);
        if (rename(path, to) != 0)
            return fail(err, err_len, "move aside", path);
        rename(id_path, id_to); /* a journal without its id is still readable rows */
        size_t used = strlen(note);
        snprintf(note + used, (size_t)note_len - used, "%sits earlier rows kept in %s", used ? "; " : "", to);
        return 0;
    }
    snprintf(err, (size_t)err_len, "journal: %s and 999 earlier journals beside it (%s.old*): remove some", path, path);
    return -1;
}

/* Replaces the journal at path by rows under this version's header: written beside it, then renamed over it, so an
 * interruption leaves the old journal or the new one whole. */
static int rewrite(const char *path, const struct mok_env *env, const struct mok_row *rows, int n, char *err,
                   int err_len)
{
    char tmp[700];
    snprintf(tmp, sizeof tmp, "%s.rewrite.%ld", path, (long)getpid());
    char *text = mok_report_csv_text(env, rows, n, MOK_CSV_HEADER | MOK_CSV_EXACT);
    FILE *f = text ? fopen(tmp, "w") : NULL;
    int bad = !f || fputs(text, f) < 0 || fflush(f) != 0 || fsync(fileno(f)) != 0;
    if (f && fclose(f) != 0)
        bad = 1;
    free(text);
    if (bad || rename(tmp, path) != 0) {
        int rc = fail(err, err_len, "rewrite", path);
        unlink(tmp);
        return rc;
    }
    return 0;
}

void mok_journal_path(char *out, size_t len, const char *dir, const char *name)
{
    snprintf(out, len, "%s/%s.journal.csv", dir, name);
}

int mok_journal_open(struct mok_journal *j, const char *dir, const char *name, const char *identity, bool resume,
                     const struct mok_env *env, struct mok_row **resumed, int *nresumed, char *note, int note_len,
                     char *err, int err_len)
{
    memset(j, 0, sizeof(*j));
    *resumed = NULL;
    *nresumed = 0;
    note[0] = '\0';
    if (mok_mkdir_p(dir, err, err_len))
        return -1;
    mok_journal_path(j->path, sizeof j->path, dir, name);
    snprintf(j->id_path, sizeof j->id_path, "%s/%s.journal.id", dir, name);
    bool keep = false;
    if (resume) {
        if (same_identity(j->id_path, identity) && access(j->path, R_OK) == 0) {
            struct mok_row *rows = calloc(MAX_RESUMED, sizeof(*rows));
            if (!rows) {
                snprintf(err, (size_t)err_len, "journal: out of memory");
                return -1;
            }
            const int torn = drop_torn_line(j->path); /* the one expected damage: a kill mid-write */
            int n = mok_report_read_csv(j->path, rows, MAX_RESUMED, err, err_len);
            if (n < 0) { /* anything else: not resumed, and kept aside below */
                snprintf(note, (size_t)note_len, "journal %s unreadable (%s): not resuming", j->path, err);
                free(rows);
            } else {
                *resumed = rows;
                *nresumed = n;
                keep = true;
                snprintf(note, (size_t)note_len, "resuming: %d rows from %s%s", n, j->path,
                         torn ? " (a row cut off mid-write dropped)" : "");
            }
        } else {
            snprintf(note, (size_t)note_len, "no journal of this config and machine at %s: measuring everything",
                     j->path);
        }
    }
    if (keep && !same_header(j->path, env)) {
        /* a journal of an older report schema (its columns differ): appending rows of this one under its header
         * would make it unreadable, so its rows move into this schema first */
        if (rewrite(j->path, env, *resumed, *nresumed, err, err_len))
            return -1;
        size_t used = strlen(note);
        snprintf(note + used, (size_t)note_len - used, " (rewritten with this version's columns)");
    }
    if (keep) {
        j->f = fopen(j->path, "a");
        return j->f ? 0 : fail(err, err_len, "open", j->path);
    }
    if (move_aside(j->path, j->id_path, note, note_len, err, err_len))
        return -1;
    FILE *idf = fopen(j->id_path, "w");
    if (!idf || fputs(identity, idf) < 0 || fclose(idf) != 0)
        return fail(err, err_len, "write", j->id_path);
    j->f = fopen(j->path, "w");
    if (!j->f)
        return fail(err, err_len, "open", j->path);
    char *head = mok_report_csv_text(env, NULL, 0, MOK_CSV_HEADER);
    int bad = !head || fputs(head, j->f) < 0 || fflush(j->f) != 0;
    free(head);
    return bad ? fail(err, err_len, "write", j->path) : 0;
}

int mok_journal_append(struct mok_journal *j, const struct mok_env *env, const struct mok_row *row, char *err,
                       int err_len)
{
    if (!j->f)
        return 0;
    /* exact times: a resumed row goes into the JSON report as it was measured */
    char *line = mok_report_csv_text(env, row, 1, MOK_CSV_EXACT);
    /* flushed and synced per row: a crash loses at most the row being written */
    int bad = !line || fputs(line, j->f) < 0 || fflush(j->f) != 0 || fsync(fileno(j->f)) != 0;
    free(line);
    return bad ? fail(err, err_len, "append", j->path) : 0;
}

void mok_journal_close(struct mok_journal *j)
{
    if (j->f)
        fclose(j->f);
    j->f = NULL;
}

bool mok_row_same_candidate(const struct mok_row *a, const struct mok_row *b)
{
    return !strcmp(a->model, b->model) && a->hidden == b->hidden && a->intermediate == b->intermediate &&
           a->experts == b->experts && a->topk == b->topk && a->shared_experts == b->shared_experts &&
           a->tokens_per_rank == b->tokens_per_rank && !strcmp(a->routing, b->routing) &&
           !strcmp(a->inputs, b->inputs) && !strcmp(a->dtype, b->dtype) && !strcmp(a->pass, b->pass) &&
           !strcmp(a->wgrad, b->wgrad) &&
           !strcmp(a->impl, b->impl) && !strcmp(a->params, b->params);
}
