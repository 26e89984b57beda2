/* journal: rows appended to disk as each candidate finishes, so an interrupted sweep can resume. Next to the
 * reports: <dir>/<name>.journal.csv (a CSV header, then one appended, flushed and fsync'ed row per candidate) and
 * <dir>/<name>.journal.id (what the rows were measured for: the config's canonical hash and the machine). A rerun
 * with --resume and the same identity reuses those rows instead of measuring them again. */
#ifndef MOK_JOURNAL_H
#define MOK_JOURNAL_H

#include <stdbool.h>
#include <stdio.h>

#include "report.h"

struct mok_journal {
    char path[600], id_path[600];
    FILE *f;
};

/* The journal's path, <dir>/<name>.journal.csv, into out (truncated to len). */
void mok_journal_path(char *out, size_t len, const char *dir, const char *name);
/* Opens the journal for appending. With resume and a matching identity, the rows already there are returned in
 * *resumed (malloc'ed, *nresumed of them; free them) and kept; otherwise the journal starts empty (a mismatch
 * with resume is reported in note). Returns 0, or -1 with a message in err. */
int mok_journal_open(struct mok_journal *j, const char *dir, const char *name, const char *identity, bool resume,
                     const struct mok_env *env, struct mok_row **resumed, int *nresumed, char *note, int note_len,
                     char *err, int err_len);
int mok_journal_append(struct mok_journal *j, const struct mok_env *env, const struct mok_row *row, char *err,
                       int err_len);
void mok_journal_close(struct mok_journal *j);

/* The same candidate on the same problem (model, shape, tokens, routing, dtype, pass, impl, params). */
bool mok_row_same_candidate(const struct mok_row *a, const struct mok_row *b);

#endif
