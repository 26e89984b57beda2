/* test_output_check: the output directory is proven writable (or refused, named) before a run, a dry-run creates
 * nothing, and the fallback directory for a failed final write is made. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "output_check.h"

#include "check.h"

static int is_dir(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

int main(int argc, char **argv)
{
    const char *scratch = argc > 1 ? argv[1] : "/tmp/test_output_check";
    char cmd[600], dir[700], err[1200], file[800];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s'", scratch, scratch);
    CHECK(system(cmd) == 0, "scratch %s", scratch);
    struct mok_output_plan plan;

    /* dry-run of a directory that does not exist yet: writable parent, nothing created, paths named */
    snprintf(dir, sizeof dir, "%.500s/new/deeper", scratch);
    CHECK(mok_output_check(dir, "quick", false, &plan, err, sizeof err) == 0, "dry-run new dir: %s", err);
    CHECK(!plan.dir_exists && !is_dir(dir), "a dry-run created %s", dir);
    CHECK(strstr(plan.csv, "/new/deeper/quick.csv") && strstr(plan.json, "/new/deeper/quick.json"), "paths %s %s",
          plan.csv, plan.json);

    /* the run creates it, and names the next free report names when some are taken */
    CHECK(mok_output_check(dir, "quick", true, &plan, err, sizeof err) == 0 && is_dir(dir), "create: %s", err);
    snprintf(file, sizeof file, "%s/quick.csv", dir);
    FILE *f = fopen(file, "w");
    CHECK(f != NULL, "fopen %s", file);
    if (f)
        fclose(f);
    CHECK(mok_output_check(dir, "quick", false, &plan, err, sizeof err) == 0 && strstr(plan.csv, "quick-1.csv"),
          "taken name: %s", plan.csv);

    /* a directory where the journal goes: refused before the run, the journal's path named */
    char journal[700];
    snprintf(journal, sizeof journal, "%.600s/jd.journal.csv", dir);
    mkdir(journal, 0755);
    CHECK(mok_output_check(dir, "jd", false, &plan, err, sizeof err) == -1 && strstr(err, journal) &&
              strstr(err, "not a regular file"), "journal dir: %s", err);
    rmdir(journal);
    CHECK(mok_output_check(dir, "jd", false, &plan, err, sizeof err) == 0, "journal dir removed: %s", err);

    /* a file where a directory should be, and a directory under a file: refused, the path named */
    CHECK(mok_output_check(file, "quick", false, &plan, err, sizeof err) == -1 && strstr(err, "not a directory"),
          "file as dir: %s", err);
    snprintf(dir, sizeof dir, "%.600s/out", file);
    CHECK(mok_output_check(dir, "quick", true, &plan, err, sizeof err) == -1 && strstr(err, file), "under a file: %s",
          err);
    CHECK(mok_output_check(dir, "quick", false, &plan, err, sizeof err) == -1, "dry-run under a file passed");

    /* a read-only directory (root writes anyway: only checked when the test runs unprivileged) */
    if (geteuid() != 0) {
        snprintf(dir, sizeof dir, "%.500s/ro", scratch);
        mkdir(dir, 0555);
        CHECK(mok_output_check(dir, "quick", true, &plan, err, sizeof err) == -1 && strstr(err, "cannot create"),
              "read-only: %s", err);
    }

    /* the fallback goes under $TMPDIR */
    setenv("TMPDIR", scratch, 1);
    char fb[512];
    CHECK(mok_output_fallback_dir("quick", fb, sizeof fb) == 0 && is_dir(fb) && !strncmp(fb, scratch, strlen(scratch)),
          "fallback %s", fb);
    printf("%s\n", failures ? "test_output_check: FAILED" : "test_output_check: all passed");
    return failures ? 1 : 0;
}
