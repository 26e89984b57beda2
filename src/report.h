/* report: what mok-bench prints and writes. A '#' header with versions and one line per rank, one row per
 * candidate as it finishes, and at the end a CSV and a JSON report, written atomically (temp file, then a
 * hard link that fails rather than overwrite) so an existing report is never replaced and an interrupted run
 * leaves no half-written file. */
#ifndef MOK_REPORT_H
#define MOK_REPORT_H

#include <stdio.h>

#define MOK_REPORT_SCHEMA_VERSION 1
#define MOK_MAX_RANKS 64

struct mok_rank_info {
    int rank;
    int pid;
    int device; /* CUDA device ordinal, -1 without a GPU */
    char host[64];
    char gpu[64];
    int sm_count;
};

struct mok_env {
    char mok_version[32];
    char commit[48];
    char cuda_runtime[16]; /* "13.0"; "none" without a GPU */
    char cuda_driver[16];
    char nccl[16];
    char mpi[96];
    char gpu[64]; /* rank 0's GPU name */
    int sm_count;
    int nranks;
    int lsa_size; /* ranks reachable by load/store (NCCL LSA team), 0 when unknown */
    /* ceilings measured by --probe in this run (0 when it did not run): GB/s per direction, TFLOP/s */
    double probe_push_gbps, probe_pull_gbps, probe_bidir_gbps, probe_gemm_tflops;
    int nrank_info;
    struct mok_rank_info ranks[MOK_MAX_RANKS];
};

/* Disposition before performance, as in the CUTLASS profiler. */
#define MOK_DISPOSITION_PASSED "passed"
#define MOK_DISPOSITION_INCORRECT "incorrect"
#define MOK_DISPOSITION_NOT_SUPPORTED "not_supported"
#define MOK_DISPOSITION_NOT_VERIFIED "not_verified" /* --no-check */
#define MOK_DISPOSITION_FAILED "failed"             /* setup or run returned an error */

/* One candidate on one problem. Times are the per-iteration max over ranks, in microseconds. A figure that
 * does not apply is NaN (written as an empty CSV cell and JSON null). Byte counts are per rank, the max over
 * ranks, and count only bytes that leave the GPU (local bytes excluded). */
struct mok_row {
    int problem;
    char model[64];
    int hidden, intermediate, experts, topk, shared_experts;
    int tokens_per_rank;
    char routing[48];
    char dtype[8];
    char pass[8];
    char impl[32];
    char params[160]; /* "chunks=4,gemm=grouped" */

    char disposition[16];
    double max_rel_err;  /* max |y - ref| / max|ref| (error relative to the output's scale) */
    double norm_rel_err; /* ||y - ref|| / ||ref|| */
    long long bad_count; /* elements over rtol, NaN included */
    long long nan_count;

    int iters;
    double time_med_us, time_p10_us, time_p90_us;
    double flops;  /* per rank: 2*T*k*3*H*I + shared experts 2*T*3*H*I*S */
    double tflops; /* flops / time_med */
    double dispatch_bytes, combine_bytes;
    double comm_gbps; /* (dispatch_bytes + combine_bytes) / time_med */
    double speedup_vs_nccl;

    /* phase breakdown, medians over iterations (NaN where an implementation has no such phase) */
    double dispatch_us;   /* dispatch a2a alone (inside the layer) */
    double dispatch_gbps; /* dispatch_bytes / dispatch_us */
    double dispatch_alone_us; /* the same dispatch (all stages, same messages) timed alone, without GEMMs beside it */
    double combine_us;    /* combine inside the layer (transfers and the owner's weighted sum) */
    double comm_sms;      /* SMs the communication kernels use (LSA path), NaN for NCCL's own choice */
    double peer_frac;     /* comm_gbps / the peer ceiling --probe measured in this run */
    double gemm_us;       /* expert GEMMs + SwiGLU inside the layer (summed over chunks) */
    double gemm1_us;      /* gemm mode: GEMM1 + SwiGLU alone */
    double gemm2_us;      /* gemm mode: GEMM2 alone */
    double gemm_frac;     /* tflops / the dense bf16 GEMM rate --probe measured in this run */
    double gemm_alone_us; /* the same GEMM calls on the same data, timed alone */
    double a2a_ref_us;    /* ncclAlltoAll moving the same remote bytes (padded), timed alone */
    double a2a_ref_gbps;

    /* power while the timed iterations ran (NVML, power.h; NaN without NVML, with MOK_POWER=0, or for runs too
     * short for the sampler) */
    double energy_j;     /* per iteration, summed over ranks: the job's energy per forward */
    double power_w;      /* mean power of a GPU, the highest rank's */
    double power_capped; /* share of that time under the power cap (clocks held down), the highest rank's */

    char inputs[48]; /* the problem's activation and weight distribution, mok_inputs_label ("uniform", ...) */

    char note[256];
};

/* Fills every numeric field with NaN and strings with "". */
void mok_row_init(struct mok_row *row);

void mok_report_print_header(FILE *out, const struct mok_env *env, const char *config_source);
void mok_report_print_table_head(FILE *out);
void mok_report_print_row(FILE *out, const struct mok_row *row);

/* Picks "<dir>/<name>.csv" and "<dir>/<name>.json" where neither exists, appending "-1", "-2", ... to name
 * when needed; creates dir (and parents). Returns 0, or -1 with a message in err. */
int mok_report_choose_paths(const char *dir, const char *name, char *csv_path, char *json_path, int path_len,
                            char *err, int err_len);

/* The CSV text of rows (with the header line when with_header), malloc'ed; NULL when out of memory. The journal
 * appends rows with it as they finish. */
char *mok_report_csv_text(const struct mok_env *env, const struct mok_row *rows, int nrows, int with_header);
/* mkdir -p; 0, or -1 with a message. */
int mok_mkdir_p(const char *dir, char *err, int err_len);

/* Writes atomically; fail (returning -1 with a message in err) if the path exists. */
int mok_report_write_csv(const char *path, const struct mok_env *env, const struct mok_row *rows, int nrows,
                         char *err, int err_len);
/* argv: the command line; config_json: the canonical config echo (a JSON text); summary_json: the
 * capacity-planning summary (a JSON text) or NULL. */
int mok_report_write_json(const char *path, int argc, char **argv, const char *config_json,
                          const struct mok_env *env, const struct mok_row *rows, int nrows, const char *summary_json,
                          char *err, int err_len);

/* Readers, for the round-trip test and later tools (resume, plot). Return the row count, or -1 with err. */
int mok_report_read_csv(const char *path, struct mok_row *rows, int max_rows, char *err, int err_len);
int mok_report_read_json(const char *path, struct mok_row *rows, int max_rows, char *err, int err_len);

/* Writes data to path atomically: temp file in the same directory, fsync, link(2) to path (fails if it
 * exists), unlink temp. Returns 0, or -1 with a message. */
int mok_write_file_atomic(const char *path, const char *data, size_t len, char *err, int err_len);

#endif
