/* problem: one benchmark problem on this rank's GPU: shapes, the seeded routing (host and device copies), the
 * input tokens and local expert weights, the output buffer every implementation writes, and the fp32
 * reference output. Inputs are replicated into `sets` identical copies at different addresses: timing
 * rotates through them so the working set exceeds L2 and no iteration reads the last one's cache. */
#ifndef MOK_PROBLEM_H
#define MOK_PROBLEM_H

#include <stdbool.h>
#include <stdint.h>

#include "cluster.h"
#include "config.h"
#include "outputs.h"

/* tensor ids of the seeded fill; a weight's id includes its global expert so any rank can regenerate it */
enum mok_tensor_kind { MOK_T_X = 1, MOK_T_W13 = 2, MOK_T_W2 = 3, MOK_T_SHARED_W13 = 4, MOK_T_SHARED_W2 = 5,
                       MOK_T_DY = 6, MOK_T_DW13 = 7, MOK_T_DW2 = 8 };

/* gemm mode, pass bwd (problem_gemm_bwd.c): the expert GEMMs' backward over the same expert-major rows. Inputs:
 * dy rows (row r is dy of its route's token), the router weights in row order and the saved context, GEMM1's
 * output gu = bf16(x W13^T) as a forward would keep it. Outputs (p->out): dx rows [rows][hidden] bf16,
 * d_router [rows] fp32, and the weight gradients dw13 [experts][2I][hidden], dw2 [experts][hidden][I]: fp32
 * accumulated into (wgrad fp32_accumulate: a seeded start, then += every run) or bf16 written (wgrad bf16). */
struct mok_gemm_bwd {
    uint16_t *dy;      /* [rows][hidden] */
    float *w;          /* [rows] */
    uint16_t *gu;      /* [rows][2I] */
    uint16_t *dx;      /* outputs */
    float *d_router;
    void *dw13, *dw2;  /* fp32, or bf16 with wgrad bf16 */
    float *dx_ref, *d_router_ref, *dw13_ref, *dw2_ref; /* NULL when checks are off */
};

/* The layers' backward (pass bwd or fwd_bwd outside gemm mode; src/problem_bwd.c). Input: dy, the gradient of the
 * layer's output, seeded per rank and copied per input set. Outputs (p->out): dx [tokens][hidden] bf16,
 * d_router [tokens][topk] fp32 (the router weights' gradient, <dy_t, o_route>), and the weight gradients of this
 * rank's experts followed by the shared MLP's (one output each: dw13 = [local experts][2I][hidden] then
 * [2 shared I][hidden], dw2 = [local experts][hidden][I] then [hidden][shared I]), fp32 accumulated into a seeded
 * start (wgrad fp32_accumulate) or bf16 written (wgrad bf16). The shared experts are replicated: their gradient here
 * is this rank's tokens' (the data-parallel all-reduce is outside the layer). */
struct mok_layer_bwd {
    uint16_t *dy[MOK_MAX_SETS];
    uint16_t *dx;
    float *d_router;
    void *dw13, *dw2;
    size_t dw13_elems, dw2_elems;
    float *dx_ref, *d_router_ref; /* device; NULL when checks are off */
    /* The weight gradients' references in pinned host memory (outputs.h: ref_host), with their max |ref| and sum
     * ref^2; v NULL when checks are off */
    struct mok_host_ref {
        float *v;
        double sq;
        float amax;
    } dw13_ref, dw2_ref;
};

/* dtype fp8_block, gemm mode (src/problem_fp8.c): e4m3 values and fp32 scales (src/fp8.h), per input set. */
struct mok_fp8_block_operands {
    uint8_t *w13[MOK_MAX_SETS], *w2[MOK_MAX_SETS]; /* [experts][2I][H], [experts][H][I] */
    float *w13_scale[MOK_MAX_SETS];                /* [experts][2I / 128][H / 128] */
    float *w2_scale[MOK_MAX_SETS];                 /* [experts][H / 128][I / 128] */
    uint8_t *a[MOK_MAX_SETS];                      /* the gemm rows [gemm_rows][H] */
    float *a_scale[MOK_MAX_SETS];                  /* [gemm_rows][H / 128] */
    int32_t *status;                               /* device: the quantizers' non-finite flag */
    uint16_t *h;                                   /* output h: GEMM1 + SwiGLU [gemm_rows][I], bf16 */
    float *h_ref;                                  /* its reference (checks on) */
    uint8_t *ref_hq;                               /* the reference's quantized copy of the output h */
    float *ref_hs;
};

/* dtype mxfp8, gemm mode (src/problem_mxfp8.c): e4m3 values and e8m0 scales (src/fp8.h), per input set; the weights'
 * scales in the quantizer's layout (the references, cublas-gemm's dequantization) and in mok's GEMM tile layout. */
struct mok_mxfp8_operands {
    uint8_t *w13[MOK_MAX_SETS], *w2[MOK_MAX_SETS]; /* [experts][2I][H], [experts][H][I] */
    uint8_t *w13_scale[MOK_MAX_SETS];              /* [experts][2I][H / 32] */
    uint8_t *w2_scale[MOK_MAX_SETS];               /* [experts][H][I / 32] */
    uint8_t *w13_tiles[MOK_MAX_SETS];              /* mok_scale_mx_tiles of w13_scale (gate and up paired) */
    uint8_t *w2_tiles[MOK_MAX_SETS];               /* mok_scale_mx_tiles of w2_scale */
    uint8_t *a[MOK_MAX_SETS];                      /* the gemm rows [gemm_rows][H] */
    uint8_t *a_scale[MOK_MAX_SETS];                /* [gemm_rows][H / 32] */
    int32_t *status;                               /* device: the quantizers' non-finite flag */
    uint16_t *h;                                   /* output h: GEMM1 + SwiGLU [gemm_rows][I], bf16 */
    float *h_ref;                                  /* its reference (checks on) */
    uint8_t *ref_hq;                               /* the reference's quantized copy of the output h */
    uint8_t *ref_hs;                               /* and its scales [gemm_rows][I / 32] */
};

/* Layer mode, dtype fp8_block or mxfp8 (src/problem_fp8_layer.c): the output h and the reference's state for its
 * check. Scales are k / 32 bytes per row in both formats (fp8_block k / 128 fp32, mxfp8 k / 32 e8m0). */
struct mok_fp8_layer {
    bool mx;                 /* mxfp8; else fp8_block */
    int32_t *status;         /* the format's quantizer flag (p->fp8.status or p->mx.status) */
    uint16_t *h;             /* output h: [tokens x topk][inter] bf16, route order */
    float *h_ref;            /* its reference (checks on) */
    /* the reference's state (checks on), kept for every refresh */
    int *first;              /* host [experts + 1]: global expert e's routes are route[first[e] .. first[e + 1]) */
    int32_t *token, *route;  /* device [tokens x topk]: the routes sorted by expert, and each one's token */
    float *shared_out;       /* [tokens][hidden]: the shared MLP's output (NULL without shared experts) */
    float *route_out;        /* [tokens x topk][hidden]: each route's expert output */
    uint8_t *xq, *hq;        /* x quantized [tokens][hidden]; the output h quantized [tokens x topk][inter] */
    void *xs, *hs;           /* their scales */
    uint8_t *aq, *wq13, *wq2; /* one expert's rows (x or h) and weights, quantized */
    void *as, *ws13, *ws2;
    uint16_t *w2;            /* one expert's regenerated bf16 W2 */
    float *o, *hf;           /* one expert's GEMM2 output [rows][hidden], its h widened [rows][inter] */
    int max_rows;
};

struct mok_problem {
    struct mok_problem_spec spec;
    int rank, nranks;
    int tokens, hidden, inter, experts, topk, shared; /* shared experts, run as one MLP of shared*inter */
    int local_experts, expert_begin;
    int sets;

    /* host copies of the routing (ids, weights [tokens][topk]) */
    int32_t *h_ids;
    float *h_w;

    /* device */
    int32_t *ids;
    float *w;
    uint16_t *x[MOK_MAX_SETS];         /* [tokens][hidden] */
    uint16_t *w13[MOK_MAX_SETS];       /* [local_experts][2*inter][hidden]: gate rows then up rows */
    uint16_t *w2[MOK_MAX_SETS];        /* [local_experts][hidden][inter] */
    uint16_t *shared_w13[MOK_MAX_SETS]; /* [2*shared*inter][hidden], NULL when shared == 0 */
    uint16_t *shared_w2[MOK_MAX_SETS];  /* [hidden][shared*inter] */
    uint16_t *y;                       /* [tokens][hidden], written by the implementation under test */
    float *y_ref;                      /* [tokens][hidden], NULL when checks are off */
    float *y_ref_bf16;                 /* layer mode, FP8 dtypes: the bf16 reference beside y_ref (information) */

    /* gemm mode: this rank's routes over all experts in expert-major order (local_experts == experts) */
    int gemm_rows;
    int32_t *gemm_offset;        /* device [experts + 1] */
    int32_t *h_gemm_offset;      /* host copy: the cuBLAS baselines need group sizes on the host */
    int32_t *h_gemm_route;       /* host [gemm_rows]: each row's route (token x topk + slot) */
    uint16_t *gemm_a[MOK_MAX_SETS]; /* [gemm_rows][hidden] */
    int32_t *gemm_token;         /* device [gemm_rows]: the token of each row */
    struct mok_gemm_bwd bwd;     /* pass bwd only */
    struct mok_layer_bwd lbwd;   /* layer mode, pass bwd or fwd_bwd */
    struct mok_fp8_block_operands fp8; /* dtype fp8_block only */
    struct mok_mxfp8_operands mx;      /* dtype mxfp8 only */
    struct mok_fp8_layer fl;           /* layer mode, dtype fp8_block or mxfp8: output h and its check */
    size_t y_elems;              /* elements of y and y_ref: tokens x hidden, or gemm_rows x hidden */

    struct mok_outputs out;      /* what the implementation writes: {y} for the forward (buffers above) */

    double flops;          /* per rank, the problem's pass (mok_problem_flops) */
    double reference_ms;   /* time the reference took */
    size_t device_bytes;   /* allocated here */
};

/* The seeded fill's pieces the problem files share: a tensor's id (its kind and, for weights, the global expert or
 * for activations the rank), the weights' spread over a K-long dot product, and a bf16 tensor of the config's
 * inputs distribution. */
uint64_t mok_tensor_id(enum mok_tensor_kind kind, uint64_t index);
float mok_weight_scale(int k);
int mok_problem_fill(const struct mok_problem_spec *s, uint16_t *dst, size_t n, uint64_t id, float spread,
                     cudaStream_t st);

/* Bytes one rank needs for the problem's own buffers (inputs x sets, output, reference and its scratch). */
size_t mok_problem_bytes(const struct mok_problem_spec *spec, int nranks, int sets, bool with_reference);
/* How many input copies make the rotated working set exceed L2 twice over (1..MOK_MAX_SETS). */
int mok_problem_sets_for(const struct mok_problem_spec *spec, int nranks, long long l2_bytes);
double mok_problem_flops(const struct mok_problem_spec *spec);

/* Builds routing, inputs and (with_reference) the reference output. Collective only in that all ranks must
 * call it (no communication inside: the reference regenerates remote experts' weights from the seed). */
int mok_problem_create(struct mok_problem *p, const struct mok_problem_spec *spec, const struct mok_cluster *cl,
                       int sets, bool with_reference, char *err, int err_len);
void mok_problem_destroy(struct mok_problem *p);
/* gemm mode (problem_gemm.c): expert-major rows, offsets and the reference of GEMM1 + SwiGLU + GEMM2 on them. */
int mok_problem_gemm_setup(struct mok_problem *p, cudaStream_t st, bool with_reference, char *err, int err_len);
void mok_problem_gemm_destroy(struct mok_problem *p);
/* The most rows any expert has (at least 1): what one expert's reference scratch must hold. */
int mok_problem_gemm_max_rows(const struct mok_problem *p);
/* gemm mode, dtype fp8_block (src/problem_fp8.c): the quantized operands of every set and (with_reference) y_ref
 * through the same quantization (plan.h: mok_plan_fp8_block_bytes, the bytes that takes). */
int mok_problem_fp8_setup(struct mok_problem *p, cudaStream_t st, bool with_reference, char *err, int err_len);
void mok_problem_fp8_destroy(struct mok_problem *p);
/* dtype fp8_block (problem_fp8.c): every set's local expert weights quantized into p->fp8 (w13, w2 and their
 * scales; what the implementations read), and gemm mode's rows (none in layer mode). */
int mok_problem_fp8_weights_setup(struct mok_problem *p, cudaStream_t st, char *err, int err_len);
/* The same for dtype mxfp8 (problem_mxfp8.c): into p->mx, the weights' scales also in mok's tile layout. */
int mok_problem_mxfp8_weights_setup(struct mok_problem *p, cudaStream_t st, char *err, int err_len);
/* Layer mode's FP8 check, both formats (src/problem_fp8_layer.c says what it checks and how). setup: the output h
 * (always, with the problem); begin (build_reference, checks on): the reference's state from its routes sorted by
 * global expert (first [experts + 1] on the host, token and route on the device: copied), x quantized, scratch for
 * max_rows rows; expert: global expert e's GEMM1 + SwiGLU reference (its regenerated bf16 w13; g and h: the
 * caller's scratch of max_rows rows) into h_ref; keep_shared: the reference's shared-MLP output (fp32 [T][H], or
 * NULL), owned from then on; refresh: y_ref from the output h (after every checked run); destroy frees it all. */
bool mok_fp8_layer_on(const struct mok_problem_spec *s); /* layer mode, pass fwd, dtype fp8_block or mxfp8 */
int mok_fp8_layer_setup(struct mok_problem *p, char *err, int err_len);
int mok_fp8_layer_begin(struct mok_problem *p, const int *first, const int32_t *token, const int32_t *route,
                        int max_rows, cudaStream_t st, char *err, int err_len);
int mok_fp8_layer_expert(struct mok_problem *p, int e, const uint16_t *w13, float *g, uint16_t *h, cudaStream_t st,
                         char *err, int err_len);
void mok_fp8_layer_keep_shared(struct mok_problem *p, float *shared_out);
int mok_fp8_layer_refresh(struct mok_problem *p, cudaStream_t st, char *err, int err_len);
void mok_fp8_layer_destroy(struct mok_problem *p);
/* After a quantizer ran on st: -1 with "<format>: non-finite values in <what>" in err if it flagged its input. */
int mok_problem_quant_status(const int32_t *status, cudaStream_t st, const char *format, const char *what, char *err,
                             int err_len);
/* y_ref from the output h an implementation just wrote (problem_fp8.c says why). */
int mok_problem_fp8_refresh(struct mok_problem *p, cudaStream_t st, char *err, int err_len);
/* The same for dtype mxfp8 (src/problem_mxfp8.c; plan.h: mok_plan_mxfp8_bytes). */
int mok_problem_mxfp8_setup(struct mok_problem *p, cudaStream_t st, bool with_reference, char *err, int err_len);
void mok_problem_mxfp8_destroy(struct mok_problem *p);
int mok_problem_mxfp8_refresh(struct mok_problem *p, cudaStream_t st, char *err, int err_len);
/* After a checked run, before its outputs are compared: the references that depend on the run's own outputs
 * (gemm mode's FP8 forward: y_ref); 0 when none do. */
int mok_problem_refresh_references(struct mok_problem *p, cudaStream_t st, char *err, int err_len);
/* gemm mode, pass bwd: dy, the row weights, the saved gu, the outputs and (with_reference) their references. */
int mok_problem_gemm_bwd_setup(struct mok_problem *p, cudaStream_t st, bool with_reference, char *err, int err_len);
void mok_problem_gemm_bwd_destroy(struct mok_problem *p);
/* Layer mode, pass bwd or fwd_bwd (problem_bwd.c): dy per set, the outputs and (with_reference) their references. */
int mok_problem_layer_bwd_setup(struct mok_problem *p, cudaStream_t st, bool with_reference, char *err, int err_len);
void mok_problem_layer_bwd_destroy(struct mok_problem *p);

#endif
