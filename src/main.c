/* mok-bench: command line, config distribution and checks across ranks, then dry-run or the benchmark. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cuda_runtime_api.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "cli.h"
#include "cluster.h"
#include "config.h"
#include "desc.h"
#include "journal.h"
#include "mok_build.h"
#include "output_check.h"
#include "plan.h"
#include "probe.h"
#include "tunedb.h"
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
        struct stat st;
        FILE *f = NULL;
        if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
            mok_errors_add(errs, "%s: is a directory (expected a JSON config file, e.g. configs/quick.json)", path);
        else if (!(f = fopen(path, "rb"))) {
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

/* "mok-bench 0.1.0 (commit abc; CUDA targets sm_90a, sm_100a, sm_103a)": each target named in full. */
static void print_version(void)
{
    printf("mok-bench %s (commit %s; CUDA targets ", MOK_VERSION, MOK_COMMIT);
    const char *a = MOK_CUDA_ARCHS;
    for (int first = 1; *a; first = 0) {
        size_t n = strcspn(a, ",");
        printf("%ssm_%.*s", first ? "" : ", ", (int)n, a);
        a += n + (a[n] == ',');
    }
    printf(")\n");
}

/* The plan's peak memory per rank against what this rank's GPU has free, before anything is allocated: a plan
 * that cannot fit is refused with the figures instead of failing an allocation mid-sweep. 0: fits everywhere. */
static int plan_fits_gpu(const struct mok_cluster *cl, const struct mok_config *cfg)
{
    size_t free_b = 0, total_b = 0;
    int l2 = 0, known = cudaMemGetInfo(&free_b, &total_b) == cudaSuccess, all_known = 0;
    if (!known)
        cudaGetLastError(); /* no figure to compare with: the allocations will say */
    MPI_Allreduce(&known, &all_known, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!all_known)
        return 0;
    cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, cl->device);
    double peak = 0;
    mok_plan_print(NULL, cfg, cl->nranks, l2 > 0 ? l2 : MOK_PLAN_ASSUMED_L2_BYTES, (long long)free_b, &peak);
    int over = peak > (double)free_b, any = 0;
    MPI_Allreduce(&over, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (over)
        fprintf(stderr, "mok-bench: rank %d: the plan needs %.2f GiB of device memory per rank (estimate, see "
                        "--dry-run), more than the %.2f GiB free of this GPU's %.2f GiB: refused before allocating\n",
                cl->rank, peak / (1u << 30), (double)free_b / (1u << 30), (double)total_b / (1u << 30));
    return any;
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
    cl->env.probe_gemm_fp8_tflops = pr.gemm_fp8_block_tflops;
    cl->env.probe_gemm_fp8_tensor_tflops = pr.gemm_fp8_tensor_tflops;
    cl->env.probe_dram_gbps = pr.dram_read_gbps;
    snprintf(cl->env.probe_dram_shape, sizeof cl->env.probe_dram_shape, "%s", pr.dram_read_shape);
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
    if (cli.help || cli.version || cli.list_params) {
        if (launcher_rank() == 0) {
            if (cli.help)
                mok_cli_usage(stdout);
            else if (cli.list_params)
                mok_impl_params_markdown(stdout);
            else
                print_version();
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
    /* Every rank parsed the same bytes, so their errors are rank 0's: it alone prints them, once. A rank that
     * fails where rank 0 did not (a different build) prints its own, named. */
    int bad = errs.count > 0, any_bad = 0, rank0_bad = cl.rank == 0 ? bad : 0;
    MPI_Allreduce(&bad, &any_bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    MPI_Bcast(&rank0_bad, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (any_bad) {
        if ((cl.rank == 0 && bad) || (cl.rank != 0 && bad && !rank0_bad)) {
            char prefix[64];
            snprintf(prefix, sizeof(prefix), "mok-bench: config error");
            if (cl.rank)
                snprintf(prefix, sizeof(prefix), "mok-bench: config error on rank %d only", cl.rank);
            mok_errors_print(&errs, stderr, prefix);
        } else if (cl.rank == 0) {
            fprintf(stderr, "mok-bench: another rank rejected the config (its errors follow from it)\n");
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

    /* The reports' directory is proven writable before any GPU work (created for a run, only checked for a
     * dry-run): a sweep must not end with its measurements unwritable. Rank 0 writes them, so rank 0 checks. */
    struct mok_output_plan out_plan;
    int out_bad = 0;
    if (cl.rank == 0) {
        char out_err[1200];
        out_bad = mok_output_check(cfg.output_dir, cfg.output_name, !cli.dry_run, &out_plan, out_err,
                                   sizeof out_err) != 0;
        if (out_bad)
            fprintf(stderr, "mok-bench: output.dir = \"%s\": %s (set output.dir or -o to a writable directory)\n",
                    cfg.output_dir, out_err);
    }
    MPI_Bcast(&out_bad, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (out_bad) {
        free(config_json);
        return finish(2);
    }
    int db_bad = 0; /* --tuned read now, as the run will read it (a missing file is an empty database): a bad one
                     * fails here, before a GPU is touched or a journal opened, not after */
    if (cl.rank == 0 && cli.tuned_path) {
        struct mok_tunedb db = {0};
        char db_err[600];
        struct stat st;
        if (stat(cli.tuned_path, &st) == 0 && S_ISDIR(st.st_mode))
            db_bad = 1, snprintf(db_err, sizeof db_err, "%s: a directory (give a file)", cli.tuned_path);
        else
            db_bad = mok_tunedb_load(cli.tuned_path, &db, db_err, sizeof db_err) != 0;
        if (db_bad)
            fprintf(stderr, "mok-bench: --tuned: %s\n", db_err);
        mok_tunedb_free(&db);
    }
    MPI_Bcast(&db_bad, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (db_bad) {
        free(config_json);
        return finish(2);
    }

    if (cli.dry_run) {
        unsigned long long plan = mok_plan_print(cl.rank == 0 ? stdout : NULL, &cfg, cl.nranks,
                                                 MOK_PLAN_ASSUMED_L2_BYTES, 0, NULL);
        unsigned long long pmin = plan, pmax = plan;
        MPI_Allreduce(&plan, &pmin, 1, MPI_UNSIGNED_LONG_LONG, MPI_MIN, MPI_COMM_WORLD);
        MPI_Allreduce(&plan, &pmax, 1, MPI_UNSIGNED_LONG_LONG, MPI_MAX, MPI_COMM_WORLD);
        if (cl.rank == 0) {
            char journal[PATH_MAX];
            mok_journal_path(journal, sizeof journal, cfg.output_dir, cfg.output_name);
            printf("# output: %s (%s, writable): reports %s and %s (the summary CSV beside them), journal %s\n",
                   cfg.output_dir, out_plan.dir_exists ? "exists" : "would be created", out_plan.csv,
                   out_plan.json, journal);
            printf("# config %016llx, plan %016llx: %s across %d ranks\n", h, plan,
                   pmin == pmax ? "identical" : "DIFFERENT", cl.nranks);
        }
        free(config_json);
        return finish(pmin == pmax ? 0 : 1);
    }

    char err[512];
    if (mok_cluster_init_gpu(&cl, err, sizeof(err))) { /* the environment: exit 2, and the output folder the check
                                                         * above created (empty) goes again */
        fprintf(stderr, "mok-bench: %s\n", err);
        if (cl.rank == 0 && out_plan.created)
            rmdir(cfg.output_dir); /* mok_mkdir_p's parents stay; the folder itself is empty */
        free(config_json);
        return finish(2);
    }
    if (plan_fits_gpu(&cl, &cfg)) {
        free(config_json);
        mok_cluster_finalize(&cl);
        return 2; /* mok_cluster_finalize ended MPI */
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
