/* cli: mok-bench's command line. Short and long forms; the usage text and the README's flag table agree. */
#ifndef MOK_CLI_H
#define MOK_CLI_H

#include <stdbool.h>
#include <stdio.h>

#include "config.h"
#include "errors.h"

struct mok_cli {
    const char *config_path;
    bool help, version, dry_run, no_check, probe, resume, list_params;
    const char *tuned_path; /* --tuned FILE: tuning database to reuse and update */
    const char *output_dir; /* overrides config output.dir */
    int nonly;
    char only[MOK_MAX_IMPLS][MOK_NAME_LEN];
    int warmup, iters; /* -1: from the config */
};

/* Returns 0, or the number of errors (each names the flag, the value and what is allowed). */
int mok_cli_parse(int argc, char **argv, struct mok_cli *cli, struct mok_errors *errs);
void mok_cli_usage(FILE *out);
/* Applies --only/-w/-n/--no-check/-o to a validated config; errors for --only names not in the config. */
int mok_cli_apply(const struct mok_cli *cli, struct mok_config *cfg, struct mok_errors *errs);

#endif
