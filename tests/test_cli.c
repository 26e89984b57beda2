/* test_cli: command-line parsing, short and long forms, and errors that name the flag and value. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

#include "check.h"

static int parse(struct mok_cli *cli, struct mok_errors *errs, int argc, char **argv)
{
    mok_errors_init(errs);
    return mok_cli_parse(argc, argv, cli, errs);
}

static int errors_contain(const struct mok_errors *e, const char *needle)
{
    for (int i = 0; i < e->count && i < MOK_MAX_ERRORS; i++)
        if (strstr(e->msg[i], needle))
            return 1;
    return 0;
}

int main(void)
{
    struct mok_cli cli;
    struct mok_errors e;
    char *a1[] = {"mok-bench", "-d", "-o", "out", "-w", "3", "-n", "7", "--only", "nccl", "--no-check", "c.json"};
    CHECK(parse(&cli, &e, 12, a1) == 0, "short forms: %s", e.msg[0]);
    CHECK(cli.dry_run && cli.no_check && !strcmp(cli.output_dir, "out") && cli.warmup == 3 && cli.iters == 7 &&
               cli.nonly == 1 && !strcmp(cli.only[0], "nccl") && !strcmp(cli.config_path, "c.json"),
           "short forms values");
    char *a2[] = {"mok-bench", "--dry-run", "--output=out2", "--warmup", "0", "--iters=9", "--only=nccl,nccl-overlap",
                  "c.json"};
    CHECK(parse(&cli, &e, 8, a2) == 0, "long forms: %s", e.msg[0]);
    CHECK(cli.warmup == 0 && cli.iters == 9 && cli.nonly == 2 && !strcmp(cli.output_dir, "out2"), "long values");
    char *a3[] = {"mok-bench", "--help"};
    CHECK(parse(&cli, &e, 2, a3) == 0 && cli.help, "--help without config");
    char *a4[] = {"mok-bench", "-V"};
    CHECK(parse(&cli, &e, 2, a4) == 0 && cli.version, "-V");
    char *a5[] = {"mok-bench"};
    CHECK(parse(&cli, &e, 1, a5) == 1 && errors_contain(&e, "CONFIG.json: missing"), "missing config");
    char *a6[] = {"mok-bench", "-n", "0", "c.json"};
    CHECK(parse(&cli, &e, 4, a6) == 1 && errors_contain(&e, "-n = \"0\": must be an integer in [1, 100000]"),
           "iters 0: %s", e.msg[0]);
    char *a7[] = {"mok-bench", "--warmup", "x", "c.json"};
    CHECK(parse(&cli, &e, 4, a7) == 1 && errors_contain(&e, "--warmup = \"x\""), "warmup x");
    char *a8[] = {"mok-bench", "--only", "cublas", "c.json"};
    CHECK(parse(&cli, &e, 4, a8) == 1 && errors_contain(&e, "unknown implementation (allowed: nccl"), "only bad");
    char *a9[] = {"mok-bench", "--bogus", "c.json"};
    CHECK(parse(&cli, &e, 3, a9) == 1 && errors_contain(&e, "--bogus: unknown option"), "unknown option");
    char *a9b[] = {"mok-bench", "--no-check=false", "--dry-run=0", "c.json"};
    CHECK(parse(&cli, &e, 4, a9b) == 2 && errors_contain(&e, "--no-check takes no value (given \"false\")") &&
              !cli.no_check && !cli.dry_run,
          "a switch with a value");
    char *a9c[] = {"mok-bench", "--only", "nccl,", "c.json"};
    CHECK(parse(&cli, &e, 4, a9c) == 1 && errors_contain(&e, "an empty name between commas"), "--only nccl,");
    char *a9d[] = {"mok-bench", "--only", "nccl,nccl", "c.json"};
    CHECK(parse(&cli, &e, 4, a9d) == 1 && errors_contain(&e, "nccl named twice"), "--only nccl,nccl");
    char *a10[] = {"mok-bench", "a.json", "b.json"};
    CHECK(parse(&cli, &e, 3, a10) == 1 && errors_contain(&e, "only one CONFIG.json"), "two configs");
    char *a12[] = {"mok-bench", "-t", "db.json", "--resume", "c.json"};
    CHECK(parse(&cli, &e, 5, a12) == 0 && cli.tuned_path && !strcmp(cli.tuned_path, "db.json") && cli.resume,
           "--tuned/--resume");
    char *a13[] = {"mok-bench", "--tuned=x.json", "-r", "c.json"};
    CHECK(parse(&cli, &e, 4, a13) == 0 && !strcmp(cli.tuned_path, "x.json") && cli.resume, "--tuned=, -r");
    char *a14[] = {"mok-bench", "--tuned"};
    CHECK(parse(&cli, &e, 2, a14) >= 1 && errors_contain(&e, "--tuned: needs a tuning database file"), "--tuned alone");
    char *a11[] = {"mok-bench", "-n"};
    CHECK(parse(&cli, &e, 2, a11) >= 1 && errors_contain(&e, "-n = \"\""), "-n without value");

    /* apply: --only filters the config's impls, keeps their tune lists, rejects names the config lacks */
    struct mok_config cfg;
    memset(&cfg, 0, sizeof(cfg));
    cfg.nimpls = 2;
    strcpy(cfg.impls[0], "nccl");
    strcpy(cfg.impls[1], "nccl-overlap");
    cfg.tune[1].nvalues[0] = 3;
    cfg.iters = 20;
    cfg.check_enabled = true;
    char *b1[] = {"mok-bench", "--only", "nccl-overlap", "-n", "5", "--no-check", "c.json"};
    parse(&cli, &e, 7, b1);
    CHECK(mok_cli_apply(&cli, &cfg, &e) == 0, "apply");
    CHECK(cfg.nimpls == 1 && !strcmp(cfg.impls[0], "nccl-overlap") && cfg.tune[0].nvalues[0] == 3 && cfg.iters == 5 &&
               !cfg.check_enabled,
           "apply values");
    char *b2[] = {"mok-bench", "--only", "nccl", "c.json"};
    parse(&cli, &e, 4, b2);
    CHECK(mok_cli_apply(&cli, &cfg, &e) == 1 && errors_contain(&e, "not among the config's impls"), "apply missing");

    /* the environment's switches: MOK_POWER is 0 or 1, anything else an error naming it */
    char *c1[] = {"mok-bench", "c.json"};
    setenv("MOK_POWER", "off", 1);
    CHECK(parse(&cli, &e, 2, c1) == 1 && errors_contain(&e, "MOK_POWER = \"off\": 0 (no power sampling) or 1"),
          "MOK_POWER=off: %s", e.count ? e.msg[0] : "(no error)");
    setenv("MOK_POWER", "0", 1);
    CHECK(parse(&cli, &e, 2, c1) == 0, "MOK_POWER=0: %s", e.count ? e.msg[0] : "");
    unsetenv("MOK_POWER");
    /* MOK_ITER_LOG: a file a run can write (checked without creating it) */
    setenv("MOK_ITER_LOG", "/nonexistent-mok-dir/iter.log", 1);
    CHECK(parse(&cli, &e, 2, c1) == 1 && errors_contain(&e, "MOK_ITER_LOG = \"/nonexistent-mok-dir/iter.log\""),
          "MOK_ITER_LOG in a missing folder: %s", e.count ? e.msg[0] : "(no error)");
    setenv("MOK_ITER_LOG", "iter.log", 1);
    CHECK(parse(&cli, &e, 2, c1) == 0 && access("iter.log", F_OK) != 0, "MOK_ITER_LOG=iter.log: %s",
          e.count ? e.msg[0] : "");
    unsetenv("MOK_ITER_LOG");

    printf("test_cli: %s (%d failures)\n", failures ? "FAILED" : "all passed", failures);
    return failures ? 1 : 0;
}
