/* report: what mok-bench prints and writes. A '#' header with versions and one line per rank, one row per
 * candidate as it finishes, and at the end a CSV and a JSON report, written atomically (temp file, then a
 * hard link that fails rather than overwrite) so an existing report is never replaced and an interrupted run
 * leaves no half-written file. */
#ifndef MOK_REPORT_H
#define MOK_REPORT_H

#include <stdio.h>

#include "desc.h"

/* 2: speedup_vs_nccl became speedup (+ speedup_baseline), power_capped became power_capped_share, and
 * exposed_comm_us, mode, capacity_factor, warmup, warmup_ms, seed, run_start were added
 * (docs/report-columns.md); 3 added wgrad, 4 h_check and h_max_rel_err, 5 roofline_grad_bytes (and the summary's
 * step), 6 y_bf16_ref_err. The readers take 1 to 6 (columns a file lacks read as empty). */
#define MOK_REPORT_SCHEMA_VERSION 6
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
    double probe_dram_gbps; /* --probe's DRAM read bandwidth (0 / NaN: not measured) */
    char probe_dram_shape[24]; /* the read shape that gave it (probe.h) */
    double probe_gemm_fp8_tflops; /* --probe's fp8_block GEMM rate (cuBLASLt; 0 / NaN: not measured) */
    double probe_gemm_fp8_tensor_tflops; /* its per-tensor-scaled rate, for comparison (the same) */
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
    char dtype[12];
    char pass[8];
    char impl[32];
    char params[MOK_PARAMS_LABEL_LEN]; /* "chunks=4,gemm=grouped" */

    char disposition[16];
    double max_rel_err;  /* max |y - ref| / max|ref| (error relative to the output's scale) */
    double norm_rel_err; /* ||y - ref|| / ||ref|| */
    long long bad_count; /* elements over rtol, NaN included */
    long long nan_count;

    int iters;
    double time_med_us, time_p10_us, time_p90_us;
    double flops;  /* per rank, the pass's useful FLOPs (mok_problem_flops; docs/report-columns.md) */
    double tflops; /* flops / time_med */
    double dispatch_bytes, combine_bytes;
    double comm_gbps; /* (dispatch_bytes + combine_bytes) / time_med */
    double speedup; /* time of the baseline named in speedup_baseline / time_med_us (summary.h: mok_baseline) */

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
    double gemm_frac;     /* tflops / the dense GEMM rate of the row's dtype --probe measured in this run */
    double gemm_alone_us; /* the same GEMM calls on the same data, timed alone */
    double a2a_ref_us;    /* ncclAlltoAll moving the same remote bytes (padded), timed alone */
    double a2a_ref_gbps;

    /* power while the timed iterations ran (NVML, power.h; NaN without NVML, with MOK_POWER=0, or for runs too
     * short for the sampler) */
    double energy_j;     /* per iteration, summed over ranks: the job's energy per forward */
    double power_w;      /* mean power of a GPU, the highest rank's */
    double power_capped_share; /* 0..1 share of that time under the power cap (clocks held down), highest rank's */

    char inputs[48]; /* the problem's activation and weight distribution, mok_inputs_label ("uniform", ...) */

    char note[512];

    /* schema 2 */
    char speedup_baseline[32]; /* the implementation speedup is against, "" when no baseline ran */
    double exposed_comm_us;    /* time_med_us - gemm_alone_us (compute alone) where a breakdown ran */
    char mode[8];              /* layer | comm | gemm */
    /* counts held as doubles so that a schema 1 file, which lacks them, reads as NaN (empty), not as 0 */
    double capacity_factor;    /* receive buffers hold factor x (tokens x topk) rows per rank */
    double warmup;             /* warm-up iterations before the timed ones */
    double warmup_ms;          /* the warm-up's minimum length, 0: iterations only */
    double seed;               /* the routing seed (config: at most 2^53 - 1, exact in a double) */
    char run_start[24];        /* when the run started, ISO 8601 UTC: 2026-12-01T21:30:00Z */
    /* each output's own verdict (passed | incorrect; "" where the problem has no such output or checks are off)
     * and error, max |out - ref| / max |ref|; max_rel_err .. nan_count above are the row's worst over them */
    char y_check[12];
    double y_max_rel_err;
    char dx_check[12];
    double dx_max_rel_err;
    char dw13_check[12];
    double dw13_max_rel_err;
    char dw2_check[12];
    double dw2_max_rel_err;
    char d_router_check[12];
    double d_router_max_rel_err;
    /* the roofline (roofline.h; NaN without --probe's DRAM and GEMM figures, and in comm mode) */
    double roofline_bytes;     /* weight + activation bytes this rank must move through DRAM */
    double roofline_mem_us;    /* roofline_bytes / --probe's DRAM read bandwidth */
    double roofline_gemm_us;   /* useful FLOPs / --probe's GEMM rate at the power cap */
    double roofline_us;        /* the larger of the two */
    double time_over_roofline; /* time_med_us / roofline_us */
    char wgrad[16];            /* the backward's weight gradients: fp32_accumulate or bf16; empty for the forward */
    /* schema 4: gemm mode's FP8 forward checks GEMM1 + SwiGLU's output h on its own (problem_fp8.c) */
    char h_check[12];
    double h_max_rel_err;
    /* schema 5 */
    double roofline_grad_bytes; /* of roofline_bytes, the weight gradients' DRAM traffic (0 for the forward) */
    /* schema 6: an FP8 layer forward's y against the bf16 reference (the format's own error), as information */
    double y_bf16_ref_err;
};

/* The outputs the report has columns for, in column order: the forward's y, the backward's dx (bf16, tokens x
 * hidden), dw13 and dw2 (the weight gradients) and d_router (fp32, tokens x topk); then h, GEMM1 + SwiGLU's output
 * (bf16, rows x intermediate), which gemm mode's FP8 forward checks apart (schema 4). */
#define MOK_OUTPUT_NAMES {"y", "dx", "dw13", "dw2", "d_router", "h"}
/* Sets output name's verdict and error in row; -1 when the report has no columns for name. */
int mok_row_set_output(struct mok_row *row, const char *name, const char *verdict, double max_rel_err);

/* Fills every numeric field with NaN and strings with "". */
void mok_row_init(struct mok_row *row);

/* The row's note becomes "first; note" (first alone if the note was empty), cut at the field's end: what must be
 * read goes first. A first that does not fit leaves the note as it was. */
void mok_row_note_prepend(struct mok_row *row, const char *first);

void mok_report_print_header(FILE *out, const struct mok_env *env, const char *config_source);
void mok_report_print_table_head(FILE *out);
void mok_report_print_row(FILE *out, const struct mok_row *row);

/* Picks "<dir>/<name>.csv" and "<dir>/<name>.json" where neither exists (nor "<dir>/<name>.summary.csv"), appending "-1", "-2", ... to name
 * when needed; creates dir (and parents). Returns 0, or -1 with a message in err. */
int mok_report_choose_paths(const char *dir, const char *name, char *csv_path, char *json_path, int path_len,
                            char *err, int err_len);

/* The CSV text of rows, malloc'ed; NULL when out of memory. flags: MOK_CSV_HEADER starts with the header line;
 * MOK_CSV_EXACT writes times exactly, as every other number (the journal does: its rows come back into the JSON
 * report), instead of to 0.1 us or 4 significant digits (mok_report_fmt_time). The journal appends rows with it as
 * they finish. */
#define MOK_CSV_HEADER 1
#define MOK_CSV_EXACT 2
char *mok_report_csv_text(const struct mok_env *env, const struct mok_row *rows, int nrows, int flags);
/* The columns every CSV row ends with: the environment (struct mok_env), repeated on each row. NULL-terminated. */
extern const char *const mok_report_env_columns[];
/* One CSV cell of text s, RFC 4180 quoted when it needs to be. */
void mok_report_csv_cell(FILE *out, const char *s);
/* The shortest of %.15g..%.17g that reads back to exactly v (non-finite values are the caller's). */
void mok_report_fmt_exact(char *buf, size_t len, double v);
/* A time to 0.1 us or 4 significant digits, whichever is finer (NaN: ""): min_decimals is where 0.1 us falls
 * in the unit (1 for us, 4 for ms). */
void mok_report_fmt_time(char *buf, size_t len, double v, int min_decimals);
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

/* "<stem>.summary.csv" beside the report "<stem>.csv": where the summary's CSV goes. 0, or -1 when too long. */
int mok_report_summary_path(const char *csv_path, char *out, int len);

/* Readers, for the round-trip test and later tools (resume, plot). Return the row count, or -1 with err. They read
 * schema 1 and 2: a schema 1 file's speedup_vs_nccl becomes speedup (speedup_baseline the baseline schema 1 used
 * for the row's mode: nccl, nccl-p2p or cublas-gemm), power_capped becomes power_capped_share, and the columns
 * schema 2 added read as empty (NaN, "", 0). */
int mok_report_read_csv(const char *path, struct mok_row *rows, int max_rows, char *err, int err_len);
int mok_report_read_json(const char *path, struct mok_row *rows, int max_rows, char *err, int err_len);

/* Writes data to path atomically: temp file in the same directory, fsync, link(2) to path (fails if it
 * exists), unlink temp. Returns 0, or -1 with a message. */
int mok_write_file_atomic(const char *path, const char *data, size_t len, char *err, int err_len);

#endif
