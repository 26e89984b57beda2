/* output_check: the output directory's writability, checked before the sweep (see output_check.h). */
#include "output_check.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "journal.h"
#include "report.h"

/* Creates and removes a probe file in dir: access(2) says yes to root on any mode and knows nothing of read-only
 * or full file systems, so only a real create proves the reports can be written. */
static int probe_write(const char *dir, char *err, size_t err_len)
{
    char path[PATH_MAX];
    if (snprintf(path, sizeof path, "%s/.mok-bench-write-check.%ld", dir, (long)getpid()) >= (int)sizeof path) {
        snprintf(err, err_len, "%s: path too long", dir);
        return -1;
    }
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0600);
    if (fd < 0) {
        snprintf(err, err_len, "%s: cannot create files in it: %s", dir, strerror(errno));
        return -1;
    }
    close(fd);
    unlink(path);
    return 0;
}

/* The deepest existing ancestor of dir (dir itself excluded), into out. */
static void existing_ancestor(const char *dir, char *out, size_t len)
{
    snprintf(out, len, "%s", dir);
    for (;;) {
        char *slash = strrchr(out, '/');
        while (slash && slash > out && slash[1] == '\0') { /* "a/b/" : drop the trailing slash first */
            *slash = '\0';
            slash = strrchr(out, '/');
        }
        if (!slash) {
            snprintf(out, len, ".");
            return;
        }
        if (slash == out) {
            snprintf(out, len, "/");
            return;
        }
        *slash = '\0';
        struct stat st;
        if (stat(out, &st) == 0 || errno != ENOENT)
            return; /* exists (a file here is reported by the caller's checks) */
    }
}

int mok_output_check(const char *dir, const char *name, bool create, struct mok_output_plan *plan, char *err,
                     size_t err_len)
{
    memset(plan, 0, sizeof *plan);
    if (!dir || !dir[0])
        dir = ".";
    struct stat st;
    if (stat(dir, &st) == 0) {
        if (!S_ISDIR(st.st_mode)) {
            snprintf(err, err_len, "%s: exists and is not a directory", dir);
            return -1;
        }
        plan->dir_exists = true;
    } else if (errno != ENOENT) {
        snprintf(err, err_len, "%s: %s", dir, strerror(errno));
        return -1;
    }
    if (!plan->dir_exists && create) {
        char why[512];
        if (mok_mkdir_p(dir, why, (int)sizeof why)) {
            snprintf(err, err_len, "%s", why);
            return -1;
        }
        plan->dir_exists = plan->created = true;
    }
    if (!plan->dir_exists) { /* dry-run: the directory would be created under its deepest existing ancestor */
        char anc[PATH_MAX];
        existing_ancestor(dir, anc, sizeof anc);
        if (stat(anc, &st) != 0 || !S_ISDIR(st.st_mode)) {
            snprintf(err, err_len, "%s: cannot be created: %s is %s", dir, anc,
                     stat(anc, &st) != 0 ? strerror(errno) : "not a directory");
            return -1;
        }
        char why[600];
        if (probe_write(anc, why, sizeof why)) {
            snprintf(err, err_len, "%s: cannot be created: %s", dir, why);
            return -1;
        }
        int dlen = (int)strlen(dir);
        while (dlen > 1 && dir[dlen - 1] == '/')
            dlen--;
        snprintf(plan->csv, sizeof plan->csv, "%.*s/%s.csv", dlen, dir, name);
        snprintf(plan->json, sizeof plan->json, "%.*s/%s.json", dlen, dir, name);
        return 0;
    }
    if (probe_write(dir, err, err_len))
        return -1;
    char journal[PATH_MAX]; /* a directory or device there would fail only after the GPU setup */
    mok_journal_path(journal, sizeof journal, dir, name);
    if (stat(journal, &st) == 0 && !S_ISREG(st.st_mode)) {
        snprintf(err, err_len, "%s: the journal's path exists and is not a regular file (move it, or change "
                 "output.name)", journal);
        return -1;
    }
    char why[512];
    if (mok_report_choose_paths(dir, name, plan->csv, plan->json, (int)sizeof plan->csv, why, (int)sizeof why)) {
        snprintf(err, err_len, "%s", why);
        return -1;
    }
    return 0;
}

int mok_output_fallback_dir(const char *name, char *out, size_t out_len)
{
    const char *tmp = getenv("TMPDIR");
    if (!tmp || !tmp[0])
        tmp = "/tmp";
    if (snprintf(out, out_len, "%s/mok-bench-%s-%ld", tmp, name, (long)getpid()) >= (int)out_len)
        return -1;
    char why[512];
    return mok_mkdir_p(out, why, (int)sizeof why) ? -1 : 0;
}
