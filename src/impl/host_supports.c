/* host_supports: the GPU-free half of every implementation's supports() (see host_supports.h). */
#include "host_supports.h"

#include <stdarg.h>
#include <stdio.h>

#include "params.h"
#include "schedule.h" /* MOK_SCHED_MAX_TOKENS */

/* Writes why and returns 0, so each check is one line: `return no(why, len, "...")`. */
static int no(char *why, int why_len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int no(char *why, int why_len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, (size_t)why_len, fmt, ap);
    va_end(ap);
    return 0;
}

/* What every layer and gemm implementation shares today: one cell of dtype x pass, experts spread evenly. */
static int bf16_fwd(const struct mok_problem_spec *s, int nranks, char *why, int why_len)
{
    if (s->dtype == MOK_DTYPE_FP8_BLOCK || s->dtype == MOK_DTYPE_MXFP8)
        return no(why, why_len, "%s: in layer mode the forward of nccl, nccl-overlap, lsa-layer and the megakernel "
                  "only so far", mok_dtype_name(s->dtype));
    if (s->dtype != MOK_DTYPE_BF16 || s->pass != MOK_PASS_FWD)
        return no(why, why_len, "bf16 forward only (this problem: %s %s)", mok_dtype_name(s->dtype),
                  mok_pass_name(s->pass));
    if (s->model.experts % nranks)
        return no(why, why_len, "experts %d not divisible by %d ranks", s->model.experts, nranks);
    return 1;
}

/* The NCCL baselines: the bf16 forward with any GEMM choice; the backward (bwd, fwd_bwd) on per-expert cuBLAS or
 * mok's GEMM core (gemm_mok_bwd.h; its forward then keeps GEMM1's gate/up output, unfused), not cuBLAS grouped;
 * the FP8 forwards (nccl_fp8.h): fp8_block on cuBLASLt's block-scaled GEMMs per expert or mok's core, mxfp8 on
 * mok's core or emulated (dequantize + bf16 cuBLAS, grouped or per expert). */
static int nccl_cell(const struct mok_problem_spec *s, int nranks, int gemm, char *why, int why_len)
{
    if (s->dtype == MOK_DTYPE_FP8_BLOCK || s->dtype == MOK_DTYPE_MXFP8) {
        const char *d = mok_dtype_name(s->dtype);
        if (s->pass != MOK_PASS_FWD)
            return no(why, why_len, "%s: the forward only (pass %s)", d, mok_pass_name(s->pass));
        if (gemm == 0 && s->dtype == MOK_DTYPE_FP8_BLOCK)
            return no(why, why_len, "fp8_block: per-expert cuBLASLt (gemm=per_expert) or mok's core (gemm=mok); "
                      "cuBLAS has no grouped block-scaled GEMM");
        if (s->model.hidden % 128 || s->model.intermediate % 128)
            return no(why, why_len, "%s: hidden %d and intermediate %d must be multiples of 128", d,
                      s->model.hidden, s->model.intermediate);
    } else if (s->dtype != MOK_DTYPE_BF16) {
        return no(why, why_len, "bf16, fp8_block or mxfp8 only (this problem: %s)", mok_dtype_name(s->dtype));
    }
    if (mok_pass_has_bwd(s->pass) && gemm == 0)
        return no(why, why_len, "pass %s: the backward runs per expert or on mok's core (gemm=per_expert or mok), "
                  "not cuBLAS grouped", mok_pass_name(s->pass));
    if (s->model.experts % nranks)
        return no(why, why_len, "experts %d not divisible by %d ranks", s->model.experts, nranks);
    return 1;
}

static int cublas_choice(int gemm, int gemm_streams, char *why, int why_len)
{
    if (gemm == 0 && gemm_streams != 1) /* grouped */
        return no(why, why_len, "gemm=grouped is one call per GEMM: gemm_streams must be 1 (has %d)", gemm_streams);
    if (gemm == 2 && gemm_streams != 1) /* mok: one persistent grouped GEMM */
        return no(why, why_len, "gemm=mok is one grouped launch per GEMM: gemm_streams must be 1 (has %d)",
                  gemm_streams);
    return 1;
}

/* mx_scheme picks mok-gemm's mxfp8 policy for the baselines' GEMMs: only where they run it (one candidate per
 * configuration elsewhere, not one per value of a parameter nothing reads) */
static int mx_scheme_choice(const struct mok_problem_spec *s, int mx_scheme, bool mok_core, char *why, int why_len)
{
    if (mx_scheme != 0 && (s->dtype != MOK_DTYPE_MXFP8 || s->pass != MOK_PASS_FWD || !mok_core))
        return no(why, why_len, "mx_scheme %d applies to dtype mxfp8's forward on mok's GEMM core only (this "
                  "problem: %s %s%s; leave it at 0)", mx_scheme, mok_dtype_name(s->dtype), mok_pass_name(s->pass),
                  mok_core ? "" : ", not on mok's GEMM core");
    return 1;
}

int nccl_host_supports(const struct mok_problem_spec *spec, int nranks, const int *params, char *why, int why_len)
{
    struct mok_params_nccl p = mok_params_nccl(params);
    return nccl_cell(spec, nranks, p.gemm, why, why_len) && cublas_choice(p.gemm, p.gemm_streams, why, why_len) &&
           mx_scheme_choice(spec, p.mx_scheme, p.gemm == 2, why, why_len);
}

int nccl_overlap_host_supports(const struct mok_problem_spec *spec, int nranks, const int *params, char *why,
                               int why_len)
{
    struct mok_params_nccl_overlap p = mok_params_nccl_overlap(params);
    if (!nccl_cell(spec, nranks, p.gemm, why, why_len) || !cublas_choice(p.gemm, p.gemm_streams, why, why_len) ||
        !mx_scheme_choice(spec, p.mx_scheme, p.gemm == 2, why, why_len))
        return 0;
    int local = spec->model.experts / nranks;
    if (p.expert_groups > local)
        return no(why, why_len, "expert_groups %d > local experts %d", p.expert_groups, local);
    if (p.chunks > spec->tokens_per_rank)
        return no(why, why_len, "chunks %d > tokens per rank %d", p.chunks, spec->tokens_per_rank);
    return 1;
}

int nccl_p2p_host_supports(const struct mok_problem_spec *spec, int nranks, const int *params, char *why, int why_len)
{
    (void)params;
    if (spec->model.experts % nranks)
        return no(why, why_len, "experts %d not divisible by %d ranks", spec->model.experts, nranks);
    return 1;
}

int cublas_gemm_host_supports(const struct mok_problem_spec *spec, int nranks, const int *params, char *why,
                              int why_len)
{
    struct mok_params_cublas_gemm p = mok_params_cublas_gemm(params);
    (void)nranks;
    if (spec->dtype == MOK_DTYPE_FP8_BLOCK) {
        if (spec->pass != MOK_PASS_FWD || p.gemm != 1)
            return no(why, why_len, "fp8_block: the forward per expert (gemm=per_expert) on cuBLASLt's block-scaled "
                      "FP8 GEMMs (no grouped FP8 GEMM with block scales in cuBLAS)");
        if (spec->model.hidden % 128 || spec->model.intermediate % 128)
            return no(why, why_len, "fp8_block: hidden %d and intermediate %d must be multiples of 128",
                      spec->model.hidden, spec->model.intermediate);
        return cublas_choice(p.gemm, p.gemm_streams, why, why_len);
    }
    if (spec->dtype == MOK_DTYPE_MXFP8) {
        /* emulated (gemm_mx_emulated.c): dequantized to bf16, then this implementation's bf16 GEMMs */
        if (spec->pass != MOK_PASS_FWD)
            return no(why, why_len, "mxfp8: the forward only (pass %s)", mok_pass_name(spec->pass));
        if (spec->model.hidden % 128 || spec->model.intermediate % 128)
            return no(why, why_len, "mxfp8: hidden %d and intermediate %d must be multiples of 128",
                      spec->model.hidden, spec->model.intermediate);
        return cublas_choice(p.gemm, p.gemm_streams, why, why_len);
    }
    if (spec->dtype != MOK_DTYPE_BF16)
        return no(why, why_len, "bf16, fp8_block or mxfp8 (this problem: %s)", mok_dtype_name(spec->dtype));
    if (mok_pass_has_bwd(spec->pass) && p.gemm != 1)
        return no(why, why_len, "the backward runs per expert (gemm=per_expert) so far");
    return cublas_choice(p.gemm, p.gemm_streams, why, why_len);
}

int lsa_host_supports(const struct mok_problem_spec *spec, int nranks, const int *params, char *why, int why_len)
{
    struct mok_params_lsa p = mok_params_lsa(params);
    if (nranks > MOK_LSA_MAX_RANKS || spec->model.topk > 32 || spec->tokens_per_rank >= MOK_SCHED_MAX_TOKENS)
        return no(why, why_len, "at most %d ranks, top-32 and 2^20 tokens", MOK_LSA_MAX_RANKS);
    if (spec->model.experts % nranks)
        return no(why, why_len, "experts %d not divisible by %d ranks", spec->model.experts, nranks);
    const int push = p.dispatch == 1, landing = p.layout == 1, bulk = p.copy == 1, per_rank = p.combine == 1;
    const int overlap = p.reduce == 1, chunk_default = p.reduce_chunk == MOK_LSA_REDUCE_CHUNK;
    if (push && !landing)
        return no(why, why_len, "dispatch=push needs layout=landing (the owner does not know the slots)");
    if (landing && bulk && (!push || !per_rank))
        return no(why, why_len, "copy=bulk with layout=landing is the bulk ring of the push and the per-rank "
                  "combine: needs dispatch=push and combine=per_rank");
    if (!overlap && p.reduce_chunk && !chunk_default)
        return no(why, why_len, "reduce_chunk %d with reduce=after: only reduce=overlap has chunk flags (leave it "
                  "at %d)", p.reduce_chunk, MOK_LSA_REDUCE_CHUNK);
    /* compute-sanitizer racecheck reported a shared-memory hazard in the ring combine with 16-token chunks
     * (results/h200x2/2026-11-30-lsa-comm-v4; outputs were bitwise right); until it is understood the ring keeps
     * the chunk size it was checked with */
    if (overlap && bulk && landing && p.reduce_chunk && !chunk_default)
        return no(why, why_len, "reduce_chunk %d with copy=bulk, layout=landing: the bulk ring's combine runs with "
                  "%d only", p.reduce_chunk, MOK_LSA_REDUCE_CHUNK);
    if (overlap && !per_rank)
        return no(why, why_len, "reduce=overlap sums per-rank partials as chunks arrive: needs combine=per_rank");
    return 1;
}

/* mok-gemm's and the megakernel's mx_scheme and land_stages: mxfp8's forward only, land_stages with an expanding
 * scheme (one candidate per configuration of the other dtypes, not one per value of a parameter they ignore) */
static int mx_scheme_own(const struct mok_problem_spec *spec, int mx_scheme, int land_stages, char *why, int why_len)
{
    if (mx_scheme != 0 && (spec->dtype != MOK_DTYPE_MXFP8 || mok_pass_has_bwd(spec->pass)))
        return no(why, why_len, "mx_scheme %d applies to dtype mxfp8's forward only (this problem: %s %s; leave it "
                  "at 0)", mx_scheme, mok_dtype_name(spec->dtype), mok_pass_name(spec->pass));
    if (land_stages != 0 && (mx_scheme == 0 || mx_scheme == 3 || land_stages < 2))
        return no(why, why_len, "land_stages %d: 0, or 2..4 with mx_scheme 1 or 2 (their landing ring)", land_stages);
    return 1;
}

int mok_gemm_host_supports(const struct mok_problem_spec *spec, int nranks, const int *params, char *why,
                           int why_len)
{
    struct mok_params_mok_gemm p = mok_params_mok_gemm(params);
    (void)nranks;
    if (!mx_scheme_own(spec, p.mx_scheme, p.land_stages, why, why_len))
        return 0;
    if (p.lean && (spec->dtype != MOK_DTYPE_FP8_BLOCK || mok_pass_has_bwd(spec->pass)))
        return no(why, why_len, "lean 1 is a layout of fp8_block's forward GEMMs (this problem: %s %s)",
                  mok_dtype_name(spec->dtype), mok_pass_name(spec->pass));
    if (p.wgrad_stages && !mok_pass_has_bwd(spec->pass))
        return no(why, why_len, "wgrad_stages %d: the backward's weight gradients only (this problem: pass %s; "
                  "leave it at 0)", p.wgrad_stages, mok_pass_name(spec->pass));
    if (mok_pass_has_bwd(spec->pass)) {
        /* the GEMM core's backward policies (gemm_mok_bwd.h): bf16, dgrad on 128-row tiles, wgrad 128 x tile_n */
        if (spec->dtype != MOK_DTYPE_BF16)
            return no(why, why_len, "pass %s: bf16 only (this problem: %s)", mok_pass_name(spec->pass),
                      mok_dtype_name(spec->dtype));
        if (p.kernel == 1)
            return no(why, why_len, "pass %s runs on the Hopper kernel (kernel=sm90), not the portable one",
                      mok_pass_name(spec->pass));
        if (p.tile_m != 128 || p.cluster != 1 || p.lockstep_k != 0 || p.fp8_n != 128)
            return no(why, why_len, "pass %s: 128-row tiles without clusters or lockstep (tile_m %d, cluster %d, "
                      "lockstep_k %d; fp8_n stays 128, has %d)", mok_pass_name(spec->pass), p.tile_m, p.cluster,
                      p.lockstep_k, p.fp8_n);
        if (p.tile_n != 128 && p.tile_n != 256)
            return no(why, why_len, "tile_n %d: 128 or 256", p.tile_n);
        return 1;
    }
    if (spec->dtype == MOK_DTYPE_FP8_BLOCK) {
        if (p.kernel == 1)
            return no(why, why_len, "fp8_block runs on the Hopper kernel (kernel=sm90), not the portable one");
        if (spec->model.hidden % 128 || spec->model.intermediate % 128)
            return no(why, why_len, "fp8_block: hidden %d and intermediate %d must be multiples of 128",
                      spec->model.hidden, spec->model.intermediate);
        if (p.tile_m != 128 || p.lockstep_k != 0)
            return no(why, why_len, "fp8_block runs 128 x 128 or 128 x 256 tiles without lockstep (tile_m %d, tile_n "
                      "%d, lockstep_k %d)", p.tile_m, p.tile_n, p.lockstep_k);
        if (p.tile_n == 256 && p.cluster != 1) /* kernels/gemm/sm90_grouped.cu says why */
            return no(why, why_len, "fp8_block's 128 x 256 tiles run without clusters (cluster %d)", p.cluster);
        if (p.lean && p.tile_n != 256)
            return no(why, why_len, "lean 1 is a layout of fp8_block's 128 x 256 tiles (tile_n %d)", p.tile_n);
        return 1;
    }
    if (spec->dtype == MOK_DTYPE_MXFP8) {
        if (p.kernel == 1)
            return no(why, why_len, "mxfp8 runs on the Hopper kernel (kernel=sm90), not the portable one");
        if (spec->model.hidden % 128 || spec->model.intermediate % 128)
            return no(why, why_len, "mxfp8: hidden %d and intermediate %d must be multiples of 128",
                      spec->model.hidden, spec->model.intermediate);
        if (p.mx_scheme >= 1) { /* kernels/gemm/sm90_mx_expand.cuh */
            if (p.tile_m != 128 || (p.tile_n != 128 && p.tile_n != 256) || p.lockstep_k != 0 || p.cluster != 1)
                return no(why, why_len, "mxfp8 mx_scheme %d runs 128 x 128 or 128 x 256 tiles without lockstep or "
                          "clusters (tile_m %d, tile_n %d, lockstep_k %d, cluster %d)", p.mx_scheme, p.tile_m,
                          p.tile_n, p.lockstep_k, p.cluster);
            if (p.fp8_n != 128)
                return no(why, why_len, "fp8_n %d applies to mx_scheme 0 only (leave it at 128)", p.fp8_n);
            return 1;
        }
        if (p.tile_m != 128 || p.tile_n != 128 || p.lockstep_k != 0 || p.cluster != 1)
            return no(why, why_len, "mxfp8 runs 128 x 128 tiles without lockstep or clusters (tile_m %d, tile_n %d, "
                      "lockstep_k %d, cluster %d)", p.tile_m, p.tile_n, p.lockstep_k, p.cluster);
        return 1;
    }
    if (spec->dtype != MOK_DTYPE_BF16)
        return no(why, why_len, "bf16, fp8_block or mxfp8 (this problem: %s)", mok_dtype_name(spec->dtype));
    if (p.fp8_n != 128) /* one candidate per bf16 configuration, not one per value of a parameter it ignores */
        return no(why, why_len, "fp8_n %d applies to the FP8 dtypes only (leave it at 128)", p.fp8_n);
    if (p.kernel == 1) /* the portable kernel has no tuning knobs */
        return 1;
    if (p.tile_n != 128 && p.tile_n != 256)
        return no(why, why_len, "tile_n %d: 128 or 256", p.tile_n);
    if (p.tile_m != 64 && p.tile_m != 128 && p.tile_m != 256)
        return no(why, why_len, "tile_m %d: 64, 128 or 256", p.tile_m);
    if (p.tile_m == 256 && p.tile_n != 128)
        return no(why, why_len, "tile_m 256 needs tile_n 128 (two 64-row wgmmas per consumer warpgroup)");
    if (p.tile_m == 64 && (p.tile_n != 256 || p.cluster != 1))
        return no(why, why_len, "tile_m 64 needs tile_n 256 and cluster 1 (the warpgroups split 256 columns)");
    return 1;
}

/* lsa-layer's FP8 forward (lsa_layer_fp8.c): x quantized into wire rows the LSA transfers copy, unpacked from the
 * slots after the whole dispatch, and mok's core on the FP8 configuration nccl's gemm=mok runs (fp8_mlp.h), whose
 * tiles and ring are fixed: a candidate per value of tile_n or stages would run the same GEMMs. */
static int lsa_layer_fp8(const struct mok_problem_spec *s, const struct mok_params_lsa_layer *lp, char *why,
                         int why_len)
{
    const char *d = mok_dtype_name(s->dtype);
    if (s->pass != MOK_PASS_FWD)
        return no(why, why_len, "%s: the forward only (pass %s; the backward is bf16)", d, mok_pass_name(s->pass));
    if (lp->kernel != 0)
        return no(why, why_len, "%s runs on mok's Hopper GEMM core (kernel=sm90), not the portable kernel", d);
    if (lp->overlap != 0)
        return no(why, why_len, "%s: overlap=none only (GEMM1 reads e4m3 rows unpacked from the slots once the whole "
                  "dispatch is in, so it cannot run beside it)", d);
    if (lp->tile_n != 128 || lp->stages != 0)
        return no(why, why_len, "%s: the GEMMs run nccl gemm=mok's FP8 configuration (src/impl/fp8_mlp.c: its own "
                  "tiles and the deepest ring): leave tile_n at 128 and stages at 0 (has tile_n %d, stages %d)", d,
                  lp->tile_n, lp->stages);
    if (s->model.hidden % 128 || s->model.intermediate % 128)
        return no(why, why_len, "%s: hidden %d and intermediate %d must be multiples of 128", d, s->model.hidden,
                  s->model.intermediate);
    return 1;
}

int lsa_layer_host_supports(const struct mok_problem_spec *spec, int nranks, const int *params, char *why,
                            int why_len)
{
    struct mok_params_lsa_layer lp = mok_params_lsa_layer(params);
    struct mok_problem_spec fwd = *spec; /* the backward (lsa_layer_bwd.c) rides on the forward's transfers */
    fwd.pass = MOK_PASS_FWD;
    if (!mx_scheme_choice(spec, lp.mx_scheme, lp.kernel == 0, why, why_len))
        return 0;
    if (spec->dtype == MOK_DTYPE_FP8_BLOCK || spec->dtype == MOK_DTYPE_MXFP8) {
        if (!lsa_layer_fp8(spec, &lp, why, why_len))
            return 0;
        fwd.dtype = MOK_DTYPE_BF16; /* the rest as the bf16 forward's */
    }
    if (!bf16_fwd(&fwd, nranks, why, why_len))
        return 0;
    if (spec->model.shared_experts)
        return no(why, why_len, "shared experts are not supported yet");
    if (mok_pass_has_bwd(spec->pass) && (lp.kernel != 0 || lp.overlap != 0 || lp.combine != 0))
        return no(why, why_len, "pass %s: the backward runs on mok's GEMM core (kernel=sm90) after the dispatch "
                  "(overlap=none) and sends dx per route (combine=per_route)", mok_pass_name(spec->pass));
    struct mok_params_lsa t = mok_params_lsa_of_layer(&lp);
    int values[MOK_MAX_PARAMS];
    mok_params_lsa_values(&t, values);
    if (!lsa_host_supports(&fwd, nranks, values, why, why_len))
        return 0;
    if (lp.overlap == 1 && lp.kernel == 1)
        return no(why, why_len, "overlap=gemm1 needs kernel=sm90 (ready counters)");
    if (lp.kernel == 0 && lp.tile_n != 128 && lp.tile_n != 256)
        return no(why, why_len, "tile_n %d: 128 or 256", lp.tile_n);
    return 1;
}

/* The first of the megakernel's backward-only parameters that is away from its default, by name. */
static const char *bwd_only_param(const struct mok_params_megakernel *p)
{
    if (p->act)
        return "act=recompute";
    if (p->wgrad_mix != -1)
        return "wgrad_mix 0 or 1 (leave it at -1)";
    if (!p->wgrad_reduce)
        return "wgrad_reduce=0 (leave it at 1)";
    return p->shared_sms ? "shared_sms" : "shared_units";
}

int megakernel_host_supports(const struct mok_problem_spec *spec, int nranks, const int *params, char *why,
                             int why_len)
{
    struct mok_params_megakernel p = mok_params_megakernel(params);
    const struct mok_model *m = &spec->model;
    if (!mx_scheme_own(spec, p.mx_scheme, p.land_stages, why, why_len))
        return 0;
    if (p.mx_scheme == 2)
        return no(why, why_len, "mx_scheme 2 (the rows expanded in shared memory beside bf16 weights) is mok-gemm's "
                  "only: 0, 1 or 3");
    /* fp8_tile_n applies to fp8_block's forward; elsewhere only its default (256) is one candidate */
    if ((p.fp8_tile_n != 128 && p.fp8_tile_n != 256) ||
        (p.fp8_tile_n == 128 && (spec->dtype != MOK_DTYPE_FP8_BLOCK || mok_pass_has_bwd(spec->pass))))
        return no(why, why_len, "fp8_tile_n %d applies to dtype fp8_block's forward, 128 or 256 (this problem: %s %s; "
                  "leave it at 256)", p.fp8_tile_n, mok_dtype_name(spec->dtype), mok_pass_name(spec->pass));
    if (p.swap_tail && (spec->dtype != MOK_DTYPE_BF16 || mok_pass_has_bwd(spec->pass) || p.split_half))
        return no(why, why_len, "swap_tail 1 applies to the bf16 forward without split_half (this problem: %s %s, "
                  "split_half %d)", mok_dtype_name(spec->dtype), mok_pass_name(spec->pass), p.split_half);
    if (p.gather == 1 &&
        (spec->dtype != MOK_DTYPE_BF16 || mok_pass_has_bwd(spec->pass) || !p.dispatch || p.own_first || p.swap_tail))
        return no(why, why_len, "gather 1 applies to the bf16 forward with dispatch=push, own_first 0 and swap_tail 0 "
                  "(this problem: %s %s, dispatch %s, own_first %d, swap_tail %d)", mok_dtype_name(spec->dtype),
                  mok_pass_name(spec->pass), p.dispatch ? "push" : "pull", p.own_first, p.swap_tail);
    /* push_all applies to the FP8 forwards; elsewhere only its default (1) is one candidate */
    if (p.push_all != 1 && (spec->dtype == MOK_DTYPE_BF16 || mok_pass_has_bwd(spec->pass)))
        return no(why, why_len, "push_all %d applies to the FP8 forwards (dtype fp8_block or mxfp8, pass fwd; this "
                  "problem: %s %s; leave it at 1): the bf16 push leaves a rank's own rows in place", p.push_all,
                  mok_dtype_name(spec->dtype), mok_pass_name(spec->pass));
    if (mok_pass_has_bwd(spec->pass)) { /* the fused backward (kernels/megakernel/backward.cu): its own cell */
        struct mok_problem_spec fwd = *spec;
        fwd.pass = MOK_PASS_FWD;
        if (!bf16_fwd(&fwd, nranks, why, why_len))
            return 0;
        if (m->intermediate % 256)
            return no(why, why_len, "pass %s: intermediate %d must be a multiple of 256 (the backward's GEMM2-dgrad "
                      "tiles)", mok_pass_name(spec->pass), m->intermediate);
        if (p.dispatch != 1 || p.combine != 0 || p.send != 1)
            return no(why, why_len, "pass %s: the fused backward pushes dy and sends dx per route from its GEMM "
                      "epilogue: dispatch=push, combine=per_route, send=1", mok_pass_name(spec->pass));
        if (p.split_half)
            return no(why, why_len, "pass %s: split_half 0 (the forward that saves gate and up runs whole tiles)",
                      mok_pass_name(spec->pass));
        /* wgrad_reduce applies to fp32 gradients; elsewhere only its default (1) is one candidate */
        if (!p.wgrad_reduce && spec->wgrad != MOK_WGRAD_FP32_ACCUMULATE)
            return no(why, why_len, "wgrad_reduce 0 applies to wgrad fp32_accumulate (this problem: wgrad %s; leave it "
                      "at 1)", mok_wgrad_name(spec->wgrad));
        if (p.shared_sms && !m->shared_experts)
            return no(why, why_len, "shared_sms %d applies to shared experts (this model has none)", p.shared_sms);
        if (p.shared_sms && p.comm_sms + 1 + p.shared_sms > 132)
            return no(why, why_len, "shared_sms %d + comm_sms %d + 1 compute SM exceed an H200's 132 SMs",
                      p.shared_sms, p.comm_sms);
        if (p.shared_units && !m->shared_experts)
            return no(why, why_len, "shared_units 1 applies to shared experts (this model has none)");
        if (p.shared_units && p.shared_sms)
            return no(why, why_len, "shared_units 1 with shared_sms %d: the shared experts' backward runs inside "
                      "the kernel or beside it, not both", p.shared_sms);
    } else if (spec->dtype == MOK_DTYPE_FP8_BLOCK || spec->dtype == MOK_DTYPE_MXFP8) { /* megakernel/fp8_*.cuh */
        if (spec->model.experts % nranks)
            return no(why, why_len, "experts %d not divisible by %d ranks", spec->model.experts, nranks);
        if (p.dispatch != 1 || p.own_first || p.split_half)
            return no(why, why_len, "%s: dispatch=push (it quantizes the rows it sends), own_first 0 and split_half 0 "
                      "(not implemented in FP8)", mok_dtype_name(spec->dtype));
        if (p.act || p.wgrad_mix != -1 || !p.wgrad_reduce || p.shared_sms || p.shared_units)
            return no(why, why_len, "%s applies to the backward (pass bwd or fwd_bwd; this problem: fwd)",
                      bwd_only_param(&p));
    } else if (!bf16_fwd(spec, nranks, why, why_len)) {
        return 0;
    } else if (p.act || p.wgrad_mix != -1 || !p.wgrad_reduce || p.shared_sms || p.shared_units) {
        return no(why, why_len, "%s applies to the backward (pass bwd or fwd_bwd; this problem: fwd)",
                  bwd_only_param(&p));
    }
    /* the kernel's fixed 128 x 256 tiles: hidden in GEMM2 column tiles, intermediate in GEMM1 half tiles */
    if (m->hidden % 256 || m->intermediate % 128)
        return no(why, why_len, "hidden %d must be a multiple of 256 and intermediate %d of 128 (the 128 x 256 tiles)",
                  m->hidden, m->intermediate);
    if (p.send && p.combine == 1)
        return no(why, why_len, "send=1 sends rows from the GEMM2 epilogue: needs combine=per_route");
    if (p.own_first && p.dispatch != 1)
        return no(why, why_len, "own_first %d needs dispatch=push", p.own_first);
    if (p.combine_sms > p.comm_sms)
        return no(why, why_len, "combine_sms %d > comm_sms %d (they are some of the comm SMs)", p.combine_sms,
                  p.comm_sms);
    if (p.stages == 1)
        return no(why, why_len, "stages 1: 0 (as many as fit) or 2..8");
    return 1;
}
