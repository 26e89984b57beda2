/* cli: argument parsing without getopt's global state, so tests can parse many command lines in one process. */
#include "cli.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "desc.h"

void mok_cli_usage(FILE *out)
{
    fprintf(out,
            "usage: mok-bench [options] CONFIG.json  |  mok-bench --probe [CONFIG.json]\n"
            "  Benchmarks MoE layer implementations (fused megakernel and NCCL baselines) on the problems of\n"
            "  CONFIG.json, one MPI rank per GPU: mpirun -np N mok-bench CONFIG.json\n"
            "\n"
            "options:\n"
            "  -h, --help             print this help and exit\n"
            "  -V, --version          print version, commit and CUDA targets, and exit\n"
            "      --list-params      print every implementation's tuning parameters (a Markdown table) and exit\n"
            "  -d, --dry-run          validate the config and print the plan (problems x implementations x\n"
            "                         candidates, memory per rank); needs no GPU\n"
            "  -o, --output DIR       write reports under DIR (overrides output.dir)\n"
            "      --only IMPL[,IMPL] run only these implementations of the config\n"
            "  -w, --warmup N         warm-up iterations per candidate (overrides timing.warmup)\n"
            "  -n, --iters N          timed iterations per candidate (overrides timing.iters)\n"
            "      --no-check         skip the reference check (rows say not_verified)\n"
            "      --probe            first measure this machine's ceilings (peer NVLink bandwidth, dense bf16\n"
            "                         GEMM rate) and report fractions against them; CONFIG.json is then optional\n"
            "  -t, --tuned FILE       tuning database: known problems run their stored best candidate (no search);\n"
            "                         new bests are merged into FILE at the end\n"
            "  -r, --resume           reuse the rows an interrupted run of the same config on the same machine\n"
            "                         left in its journal (<output.dir>/<name>.journal.csv)\n"
            "\n"
            "environment:\n"
            "  MOK_ITER_LOG=FILE      rank 0 appends every timed iteration's time of each candidate to FILE\n"
            "  MOK_POWER=0            no power sampling (report columns power_w, energy_j, power_capped_share empty)\n"
            "\n"
            "exit status: 0 all candidates passed; 1 a check failed or a run failed; 2 bad command line,\n"
            "environment or config (nothing is written).\n");
}

static int parse_count(const char *flag, const char *value, int lo, int hi, int *out, struct mok_errors *errs)
{
    char *end = NULL;
    errno = 0;
    long v = value ? strtol(value, &end, 10) : 0;
    if (!value || !*value || *end || errno || v < lo || v > hi) {
        mok_errors_add(errs, "%s = \"%s\": must be an integer in [%d, %d]", flag, value ? value : "", lo, hi);
        return -1;
    }
    *out = (int)v;
    return 0;
}

static void parse_only(const char *value, struct mok_cli *cli, struct mok_errors *errs)
{
    char buf[512];
    snprintf(buf, sizeof(buf), "%s", value);
    const size_t len = strlen(value);
    if (len && (value[0] == ',' || value[len - 1] == ',' || strstr(value, ",,"))) {
        mok_errors_add(errs, "--only = \"%s\": an empty name between commas (IMPL[,IMPL])", value);
        return;
    }
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        bool twice = false;
        for (int k = 0; k < cli->nonly; k++)
            twice |= !strcmp(cli->only[k], tok);
        if (twice) {
            mok_errors_add(errs, "--only = \"%s\": %s named twice", value, tok);
        } else if (!mok_impl_desc_find(tok)) {
            char allowed[256] = "";
            for (int i = 0; i < mok_impl_desc_count(); i++)
                snprintf(allowed + strlen(allowed), sizeof(allowed) - strlen(allowed), "%s%s", i ? ", " : "",
                         mok_impl_desc_at(i)->name);
            mok_errors_add(errs, "--only = \"%s\": unknown implementation (allowed: %s)", tok, allowed);
        } else if (cli->nonly >= MOK_MAX_IMPLS) {
            mok_errors_add(errs, "--only = \"%s\": more than %d implementations (the limit, MOK_MAX_IMPLS)", value,
                           MOK_MAX_IMPLS);
            return;
        } else {
            snprintf(cli->only[cli->nonly++], MOK_NAME_LEN, "%s", tok);
        }
    }
    if (cli->nonly == 0 && errs->count == 0)
        mok_errors_add(errs, "--only = \"%s\": needs at least one implementation name", value);
}

int mok_cli_parse(int argc, char **argv, struct mok_cli *cli, struct mok_errors *errs)
{
    memset(cli, 0, sizeof(*cli));
    cli->warmup = cli->iters = -1;
    int before = errs->count;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        /* --flag=value and --flag value are both accepted */
        const char *eq = strncmp(a, "--", 2) == 0 ? strchr(a, '=') : NULL;
        char name[64];
        snprintf(name, sizeof(name), "%.*s", eq ? (int)(eq - a) : (int)strlen(a), a);
        const char *inline_value = eq ? eq + 1 : NULL;
#define TAKE_VALUE() (inline_value ? inline_value : (i + 1 < argc ? argv[++i] : NULL))
        static const char *const switches[] = {"--help", "--version", "--list-params", "--dry-run", "--no-check",
                                               "--probe", "--resume"};
        bool is_switch = false;
        for (size_t k = 0; k < sizeof switches / sizeof switches[0]; k++)
            is_switch |= !strcmp(name, switches[k]);
        if (is_switch && inline_value) { /* --no-check=false would otherwise turn the check off */
            mok_errors_add(errs, "%s: %s takes no value (given \"%s\"): leave the option out to keep its default",
                           a, name, inline_value);
            continue;
        }
        if (!strcmp(name, "-h") || !strcmp(name, "--help"))
            cli->help = true;
        else if (!strcmp(name, "-V") || !strcmp(name, "--version"))
            cli->version = true;
        else if (!strcmp(name, "--list-params"))
            cli->list_params = true;
        else if (!strcmp(name, "-d") || !strcmp(name, "--dry-run"))
            cli->dry_run = true;
        else if (!strcmp(name, "--no-check"))
            cli->no_check = true;
        else if (!strcmp(name, "--probe"))
            cli->probe = true;
        else if (!strcmp(name, "-r") || !strcmp(name, "--resume"))
            cli->resume = true;
        else if (!strcmp(name, "-t") || !strcmp(name, "--tuned")) {
            const char *v = TAKE_VALUE();
            if (!v || !*v)
                mok_errors_add(errs, "%s: needs a tuning database file", name);
            else
                cli->tuned_path = v;
        }
        else if (!strcmp(name, "-o") || !strcmp(name, "--output")) {
            const char *v = TAKE_VALUE();
            if (!v || !*v)
                mok_errors_add(errs, "%s: needs a directory", name);
            else
                cli->output_dir = v;
        } else if (!strcmp(name, "--only")) {
            const char *v = TAKE_VALUE();
            if (!v)
                mok_errors_add(errs, "--only: needs IMPL[,IMPL]");
            else
                parse_only(v, cli, errs);
        } else if (!strcmp(name, "-w") || !strcmp(name, "--warmup"))
            parse_count(name, TAKE_VALUE(), 0, 10000, &cli->warmup, errs);
        else if (!strcmp(name, "-n") || !strcmp(name, "--iters"))
            parse_count(name, TAKE_VALUE(), 1, 100000, &cli->iters, errs);
        else if (a[0] == '-' && a[1] != '\0')
            mok_errors_add(errs, "%s: unknown option (see --help)", a);
        else if (cli->config_path)
            mok_errors_add(errs, "%s: only one CONFIG.json is allowed (already have %s)", a, cli->config_path);
        else
            cli->config_path = a;
#undef TAKE_VALUE
    }
    if (!cli->help && !cli->version && !cli->list_params && !cli->probe && !cli->config_path && errs->count == before)
        mok_errors_add(errs, "CONFIG.json: missing (usage: mok-bench [options] CONFIG.json)");
    /* read again where the sampler starts (power.c); help and version sample nothing, so they ignore it */
    const char *power = getenv("MOK_POWER");
    if (!cli->help && !cli->version && !cli->list_params && power && strcmp(power, "0") && strcmp(power, "1"))
        mok_errors_add(errs, "environment MOK_POWER = \"%s\": 0 (no power sampling) or 1 (the default)", power);
    /* the iteration log a run appends to: its folder must take a file (checked without creating it: a dry run
     * writes nothing), or the run would only warn per candidate and the log asked for never appear */
    const char *iter_log = getenv("MOK_ITER_LOG");
    if (!cli->help && !cli->version && !cli->list_params && iter_log && *iter_log) {
        char dir[1024];
        snprintf(dir, sizeof dir, "%s", iter_log);
        char *slash = strrchr(dir, '/');
        if (slash)
            slash == dir ? (void)(dir[1] = '\0') : (void)(*slash = '\0');
        else
            snprintf(dir, sizeof dir, ".");
        if (access(iter_log, F_OK) == 0 ? access(iter_log, W_OK) != 0 : access(dir, W_OK | X_OK) != 0)
            mok_errors_add(errs, "environment MOK_ITER_LOG = \"%s\": cannot be written (%s): a file in a writable "
                           "folder", iter_log, strerror(errno));
    }
    return errs->count - before;
}

int mok_cli_apply(const struct mok_cli *cli, struct mok_config *cfg, struct mok_errors *errs)
{
    int before = errs->count;
    if (cli->nonly) {
        struct mok_config filtered = *cfg;
        filtered.nimpls = 0;
        for (int i = 0; i < cfg->nimpls; i++)
            for (int j = 0; j < cli->nonly; j++)
                if (!strcmp(cfg->impls[i], cli->only[j])) {
                    memcpy(filtered.impls[filtered.nimpls], cfg->impls[i], MOK_NAME_LEN);
                    filtered.tune[filtered.nimpls++] = cfg->tune[i];
                }
        char listed[MOK_MAX_IMPLS * (MOK_NAME_LEN + 2)] = "";
        for (int i = 0; i < cfg->nimpls; i++)
            snprintf(listed + strlen(listed), sizeof listed - strlen(listed), "%s%s", i ? ", " : "", cfg->impls[i]);
        for (int j = 0; j < cli->nonly; j++) {
            bool found = false;
            for (int i = 0; i < cfg->nimpls; i++)
                found |= !strcmp(cfg->impls[i], cli->only[j]);
            if (!found)
                mok_errors_add(errs, "--only = \"%s\": not among the config's impls (the config has: %s)",
                               cli->only[j], listed);
        }
        *cfg = filtered;
    }
    if (cli->warmup >= 0)
        cfg->warmup = cli->warmup;
    if (cli->iters >= 1)
        cfg->iters = cli->iters;
    if (cli->no_check)
        cfg->check_enabled = false;
    if (cli->output_dir) {
        if (strlen(cli->output_dir) >= MOK_PATH_LEN)
            mok_errors_add(errs, "--output: path longer than %d characters", MOK_PATH_LEN - 1);
        else
            snprintf(cfg->output_dir, MOK_PATH_LEN, "%s", cli->output_dir);
    }
    return errs->count - before;
}
