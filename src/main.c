/* mok-bench: command line, config distribution and checks across ranks, then dry-run or the benchmark. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "cli.h"
#include "cluster.h"
#include "config.h"
#include "mok_build.h"
#include "plan.h"
#include "probe.h"
#include "version.h"

#define MAX_CONFIG_BYTES (1 << 20)

/* Under mpirun only the first rank talks before MPI is up (help, version, command-line errors). */
static int launcher_rank(void)
{
    const char *vars[] = {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "SLURM_PROCID"};
    for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
        const char *v = getenv(vars[i]);
        if (v)
            return atoi(v);
    }
    return 0;
}

/* Rank 0 reads the file; every rank gets its text (or the error) so all ranks parse the same bytes. */
static char *read_and_broadcast(const struct mok_cluster *cl, const char *path, struct mok_errors *errs)
{
    long len = -1;
    char *text = NULL;
    if (cl->rank == 0) {
        FILE *f = fopen(path, "rb");
        if (!f) {
            mok_errors_add(errs, "%s: cannot read: %s", path, strerror(errno));
        } else {
            text = malloc(MAX_CONFIG_BYTES + 1);
            size_t n = text ? fread(text, 1, MAX_CONFIG_BYTES + 1, f) : 0;
            if (!text)
                mok_errors_add(errs, "%s: out of memory", path);
            else if (n > MAX_CONFIG_BYTES)
                mok_errors_add(errs, "%s: larger than %d bytes", path, MAX_CONFIG_BYTES);
            else if (ferror(f))
                mok_errors_add(errs, "%s: read error", path);
            else
                len = (long)n;
            fclose(f);
        }
    }
    MPI_Bcast(&len, 1, MPI_LONG, 0, MPI_COMM_WORLD);
    if (len < 0) {
        free(text);
        return NULL;
    }
    if (cl->rank != 0 && !(text = malloc((size_t)len + 1)))
        MPI_Abort(MPI_COMM_WORLD, 1);
    MPI_Bcast(text, (int)len, MPI_CHAR, 0, MPI_COMM_WORLD);
    text[len] = '\0';
    return text;
}

static int finish(int code)
{
    MPI_Finalize();
    return code;
}

/* Ceilings of this machine, measured now; they go into cl->env (report header, JSON, fractions). */
static int run_probe(struct mok_cluster *cl)
{
    struct mok_probe pr;
    char err[512];
    if (mok_probe_run(cl, &pr, err, sizeof(err))) {
        fprintf(stderr, "mok-bench: --probe: %s\n", err);
        return -1;
    }
    cl->env.probe_push_gbps = pr.push_gbps;
    cl->env.probe_pull_gbps = pr.pull_gbps;
    cl->env.probe_bidir_gbps = pr.bidir_push_gbps;
    cl->env.probe_gemm_tflops = pr.gemm_bf16_tflops;
    if (cl->rank == 0)
        mok_probe_print(stdout, &pr);
    return 0;
}

static int finish_probe_only(struct mok_cluster *cl)
{
    char err[512];
    if (mok_cluster_init_gpu(cl, err, sizeof(err))) {
        fprintf(stderr, "mok-bench: %s\n", err);
        return finish(1);
    }
    int rc = run_probe(cl) ? 1 : 0;
    mok_cluster_finalize(cl);
    return rc;
}

int main(int argc, char **argv)
{
    struct mok_cli cli;
    struct mok_errors errs;
    mok_errors_init(&errs);
    if (mok_cli_parse(argc, argv, &cli, &errs)) {
        if (launcher_rank() == 0) {
            mok_errors_print(&errs, stderr, "mok-bench");
            fprintf(stderr, "mok-bench: see --help\n");
        }
        return 2;
    }
    if (cli.help || cli.version) {
        if (launcher_rank() == 0) {
            if (cli.help)
                mok_cli_usage(stdout);
            else
                printf("mok-bench %s (commit %s; CUDA targets sm_%s)\n", MOK_VERSION, MOK_COMMIT, MOK_CUDA_ARCHS);
        }
        return 0;
    }

    struct mok_cluster cl;
    if (mok_cluster_init_mpi(&argc, &argv, &cl)) {
        fprintf(stderr, "mok-bench: MPI_Init failed\n");
        return 1;
    }
    if (!cli.config_path) /* --probe alone: measure the ceilings and stop */
        return finish_probe_only(&cl);
    char *text = read_and_broadcast(&cl, cli.config_path, &errs);
    static struct mok_config cfg;
    if (text) {
        mok_config_parse(text, cli.config_path, &cfg, &errs);
        if (errs.count == 0)
            mok_config_check_ranks(&cfg, cl.nranks, &errs);
        if (errs.count == 0)
            mok_cli_apply(&cli, &cfg, &errs);
    }
    free(text);
    /* every rank parsed the same bytes; a difference here would mean different builds or registries */
    int bad = errs.count > 0, any_bad = 0;
    MPI_Allreduce(&bad, &any_bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (any_bad) {
        if (cl.rank == 0 || bad) {
            char prefix[64];
            snprintf(prefix, sizeof(prefix), "mok-bench: config error%s", cl.rank ? " (rank != 0)" : "");
            mok_errors_print(&errs, stderr, prefix);
        }
        return finish(2);
    }
    char *config_json = mok_config_to_json(&cfg);
    unsigned long long h = config_json ? mok_hash64(config_json, strlen(config_json)) : 0, hmin = h, hmax = h;
    MPI_Allreduce(&h, &hmin, 1, MPI_UNSIGNED_LONG_LONG, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(&h, &hmax, 1, MPI_UNSIGNED_LONG_LONG, MPI_MAX, MPI_COMM_WORLD);
    if (!config_json || hmin != hmax) {
        if (cl.rank == 0)
            fprintf(stderr, "mok-bench: ranks hold different configs (canonical hashes %016llx..%016llx)\n", hmin,
                    hmax);
        free(config_json);
        return finish(2);
    }

    if (cli.dry_run) {
        unsigned long long plan = mok_plan_print(cl.rank == 0 ? stdout : NULL, &cfg, cl.nranks,
                                                 MOK_PLAN_ASSUMED_L2_BYTES);
        unsigned long long pmin = plan, pmax = plan;
        MPI_Allreduce(&plan, &pmin, 1, MPI_UNSIGNED_LONG_LONG, MPI_MIN, MPI_COMM_WORLD);
        MPI_Allreduce(&plan, &pmax, 1, MPI_UNSIGNED_LONG_LONG, MPI_MAX, MPI_COMM_WORLD);
        if (cl.rank == 0)
            printf("# config %016llx, plan %016llx: %s across %d ranks\n", h, plan,
                   pmin == pmax ? "identical" : "DIFFERENT", cl.nranks);
        free(config_json);
        return finish(pmin == pmax ? 0 : 1);
    }

    char err[512];
    if (mok_cluster_init_gpu(&cl, err, sizeof(err))) {
        fprintf(stderr, "mok-bench: %s\n", err);
        free(config_json);
        return finish(1);
    }
    if (cli.probe && run_probe(&cl)) {
        free(config_json);
        mok_cluster_finalize(&cl);
        return 1;
    }
    struct mok_bench_opts bopts = {.tuned_path = cli.tuned_path, .resume = cli.resume};
    int rc = mok_bench_run(&cfg, &bopts, config_json, &cl, argc, argv);
    free(config_json);
    mok_cluster_finalize(&cl);
    return rc;
}
