/* output_check: proves before any GPU work that the reports can be written, so a sweep's measurements are never
 * lost to an output directory found unwritable at the end, and names the fallback used if the end still fails. */
#ifndef MOK_OUTPUT_CHECK_H
#define MOK_OUTPUT_CHECK_H

#include <stdbool.h>
#include <stddef.h>

/* What the check found. dir_exists: output.dir is there (else it is created, create = true, at the run's start);
 * created: this check created it (a run that stops before writing removes it again). */
struct mok_output_plan {
    bool dir_exists, created;
    char csv[1024], json[1024]; /* the report paths the run would write now (a -N suffix where names are taken) */
};

/* Checks that `dir` is (or can be created as) a directory this process can create files in, by creating and
 * removing a probe file in it or, when it does not exist yet, in its deepest existing ancestor. Creates nothing
 * that stays (create = false: the dry-run) or creates dir (create = true: the run). Returns 0, or -1 with "dir:
 * why" in err. */
int mok_output_check(const char *dir, const char *name, bool create, struct mok_output_plan *plan, char *err,
                     size_t err_len);

/* The directory reports go to when output.dir fails at the end anyway: $TMPDIR (or /tmp)/mok-bench-NAME-PID,
 * created. Returns 0 and the path, or -1. */
int mok_output_fallback_dir(const char *name, char *out, size_t out_len);

#endif
