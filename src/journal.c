/* journal: the append-only record of finished rows (see journal.h). */
#include "journal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
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
    snprintf(j->path, sizeof j->path, "%s/%s.journal.csv", dir, name);
    snprintf(j->id_path, sizeof j->id_path, "%s/%s.journal.id", dir, name);
    bool keep = false;
    if (resume) {
        if (same_identity(j->id_path, identity) && access(j->path, R_OK) == 0) {
            struct mok_row *rows = calloc(MAX_RESUMED, sizeof(*rows));
            if (!rows) {
                snprintf(err, (size_t)err_len, "journal: out of memory");
                return -1;
            }
            int n = mok_report_read_csv(j->path, rows, MAX_RESUMED, err, err_len);
            if (n < 0) { /* a torn last line (killed mid-write) is the one expected damage: start over, say so */
                snprintf(note, (size_t)note_len, "journal %s unreadable (%s): not resuming", j->path, err);
                free(rows);
            } else {
                *resumed = rows;
                *nresumed = n;
                keep = true;
                snprintf(note, (size_t)note_len, "resuming: %d rows from %s", n, j->path);
            }
        } else {
            snprintf(note, (size_t)note_len, "no journal of this config and machine at %s: measuring everything",
                     j->path);
        }
    }
    if (keep) {
        j->f = fopen(j->path, "a");
        return j->f ? 0 : fail(err, err_len, "open", j->path);
    }
    FILE *idf = fopen(j->id_path, "w");
    if (!idf || fputs(identity, idf) < 0 || fclose(idf) != 0)
        return fail(err, err_len, "write", j->id_path);
    j->f = fopen(j->path, "w");
    if (!j->f)
        return fail(err, err_len, "open", j->path);
    char *head = mok_report_csv_text(env, NULL, 0, 1);
    int bad = !head || fputs(head, j->f) < 0 || fflush(j->f) != 0;
    free(head);
    return bad ? fail(err, err_len, "write", j->path) : 0;
}

int mok_journal_append(struct mok_journal *j, const struct mok_env *env, const struct mok_row *row, char *err,
                       int err_len)
{
    if (!j->f)
        return 0;
    char *line = mok_report_csv_text(env, row, 1, 0);
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
           !strcmp(a->impl, b->impl) && !strcmp(a->params, b->params);
}
