/* test_params: the parameters named once (src/impl/params.h): each implementation's struct reads a candidate's
 * values by name in the order of its definitions (desc.c), renamed parameters name their successor, and the
 * host-side supports rules (src/impl/host_supports.c) accept and refuse what they say. */
#include <stdio.h>
#include <string.h>

#include "config.h"
#include "desc.h"
#include "host_supports.h"
#include "libmok.h"
#include "params.h"

#include "check.h"

/* For every parameter of an implementation: values[i] = i + 100, read back through the struct by the parameter's
 * name, must be 100 + its index in the definitions. */
#define CHECK_FIELD(pname, kind, lo, hi, def, help)                                                                  \
    CHECK(p.pname == 100 + mok_impl_param_index(d, #pname), "%s.%s: field reads %d, definition index %d", d->name, \
          #pname, p.pname, mok_impl_param_index(d, #pname));
#define CHECK_IMPL(impl_name, impl, TABLE)                                                                            \
    do {                                                                                                             \
        const struct mok_impl_desc *d = mok_impl_desc_find(impl_name);                                              \
        int values[MOK_MAX_PARAMS], back[MOK_MAX_PARAMS];                                                            \
        CHECK(d && d->nparams == MOK_NPARAMS_##impl, "%s: %d definitions, %d fields", impl_name, d ? d->nparams : -1, \
              MOK_NPARAMS_##impl);                                                                                   \
        for (int i = 0; i < MOK_MAX_PARAMS; i++)                                                                     \
            values[i] = 100 + i;                                                                                     \
        struct mok_params_##impl p = mok_params_##impl(values);                                                      \
        TABLE(CHECK_FIELD)                                                                                           \
        mok_params_##impl##_values(&p, back);                                                                        \
        CHECK(!memcmp(values, back, sizeof(int) * (size_t)MOK_NPARAMS_##impl), "%s: values round trip", impl_name); \
    } while (0)

static struct mok_problem_spec spec_of(int hidden, int inter, int experts, int topk, int tokens, int shared)
{
    struct mok_problem_spec s = {.mode = MOK_MODE_LAYER, .tokens_per_rank = tokens, .capacity_factor = 2,
                                 .model = {"m", hidden, inter, experts, topk, shared}};
    return s;
}

/* Defaults of an implementation, then name=value overrides. */
static void defaults(const char *impl, int *values)
{
    const struct mok_impl_desc *d = mok_impl_desc_find(impl);
    for (int i = 0; i < d->nparams; i++)
        values[i] = d->params[i].default_value;
}

static int supports(const char *impl, const struct mok_problem_spec *s, int nranks, const int *values, char *why)
{
    return mok_impl_host_supports(mok_impl_desc_find(impl), s, nranks, 1, values, why, 256);
}

/* lsa-layer's FP8 forward (s: layer mode, fp8_block or mxfp8, pass fwd, hidden and intermediate multiples of 128):
 * its defaults run; the backward, the portable kernel, GEMM1 beside the dispatch, and tile_n / stages other than the
 * FP8 configuration's are refused, each with its reason; hidden or intermediate off 128 too. */
static void lsa_fp8_checks(struct mok_problem_spec *s, int *v, char *why)
{
    const char *d = mok_dtype_name(s->dtype);
    defaults("lsa-layer", v);
    CHECK(supports("lsa-layer", s, 2, v, why), "lsa-layer %s defaults: %s", d, why);
    struct mok_params_lsa_layer lp = mok_params_lsa_layer(v);
    const struct {
        int kernel, overlap, tile_n, stages;
        const char *why;
    } no[] = {{1, 0, 128, 0, "kernel=sm90"},
              {0, 1, 128, 0, "overlap=none only"},
              {0, 0, 256, 0, "tile_n at 128 and stages at 0"},
              {0, 0, 128, 3, "tile_n at 128 and stages at 0"}};
    for (size_t i = 0; i < sizeof no / sizeof no[0]; i++) {
        struct mok_params_lsa_layer q = lp;
        q.kernel = no[i].kernel, q.overlap = no[i].overlap, q.tile_n = no[i].tile_n, q.stages = no[i].stages;
        mok_params_lsa_layer_values(&q, v);
        CHECK(!supports("lsa-layer", s, 2, v, why) && strstr(why, no[i].why), "lsa-layer %s refusal %zu: %s", d, i,
              why);
    }
    mok_params_lsa_layer_values(&lp, v);
    s->pass = MOK_PASS_FWD_BWD;
    CHECK(!supports("lsa-layer", s, 2, v, why) && strstr(why, "the forward only"), "lsa-layer %s fwd_bwd: %s", d, why);
    s->pass = MOK_PASS_FWD;
    int inter = s->model.intermediate;
    s->model.intermediate = 192;
    CHECK(!supports("lsa-layer", s, 2, v, why) && strstr(why, "multiples of 128"), "lsa-layer %s I 192: %s", d, why);
    s->model.intermediate = inter;
}

int main(void)
{
    CHECK_IMPL("nccl", nccl, MOK_PARAMS_NCCL);
    CHECK_IMPL("nccl-overlap", nccl_overlap, MOK_PARAMS_NCCL_OVERLAP);
    CHECK_IMPL("cublas-gemm", cublas_gemm, MOK_PARAMS_CUBLAS);
    CHECK_IMPL("lsa", lsa, MOK_PARAMS_LSA);
    CHECK_IMPL("mok-gemm", mok_gemm, MOK_PARAMS_MOK_GEMM);
    CHECK_IMPL("lsa-layer", lsa_layer, MOK_PARAMS_LSA_LAYER);
    CHECK_IMPL("megakernel", megakernel, MOK_PARAMS_MEGAKERNEL);

    CHECK(!strcmp(mok_impl_param_renamed("megakernel", "sms"), "comm_sms") &&
              !strcmp(mok_impl_param_renamed("mok-gemm", "sms"), "ctas") &&
              !strcmp(mok_impl_param_renamed("mok-gemm", "lockstep"), "lockstep_k") &&
              !strcmp(mok_impl_param_renamed("megakernel", "lockstep"), "wave_lockstep") &&
              mok_impl_param_renamed("nccl", "sms") == NULL,
          "renames");
    CHECK(strstr(mok_impl_param_removed("mok-gemm", "wgrad_prefetch"), "slower") &&
              strstr(mok_impl_param_removed("mok-gemm", "wgrad_pingpong"), "slower") &&
              mok_impl_param_removed("mok-gemm", "tile_n") == NULL &&
              mok_impl_param_removed("lsa-layer", "wgrad_pingpong") == NULL,
          "removals");
    for (int i = 0; i < mok_impl_desc_count(); i++) /* a former name is never a current one */
        for (int k = 0; k < mok_impl_desc_at(i)->nparams; k++) {
            CHECK(!mok_impl_param_renamed(mok_impl_desc_at(i)->name, mok_impl_desc_at(i)->params[k].name),
                  "%s.%s is both current and renamed", mok_impl_desc_at(i)->name, mok_impl_desc_at(i)->params[k].name);
            CHECK(!mok_impl_param_removed(mok_impl_desc_at(i)->name, mok_impl_desc_at(i)->params[k].name),
                  "%s.%s is both current and removed", mok_impl_desc_at(i)->name, mok_impl_desc_at(i)->params[k].name);
        }

    char why[256];
    int v[MOK_MAX_PARAMS];
    struct mok_problem_spec s = spec_of(1024, 512, 16, 2, 256, 0);
    /* nccl: gemm grouped or mok need one stream */
    defaults("nccl", v);
    struct mok_params_nccl np = mok_params_nccl(v);
    CHECK(supports("nccl", &s, 2, v, why), "nccl defaults: %s", why);
    np.gemm = 0, np.gemm_streams = 4;
    mok_params_nccl_values(&np, v);
    CHECK(!supports("nccl", &s, 2, v, why) && strstr(why, "gemm=grouped"), "grouped with 4 streams: %s", why);
    np.gemm = 2;
    mok_params_nccl_values(&np, v);
    CHECK(!supports("nccl", &s, 2, v, why) && strstr(why, "gemm=mok"), "mok with 4 streams: %s", why);
    np.gemm_streams = 1;
    mok_params_nccl_values(&np, v);
    CHECK(supports("nccl", &s, 2, v, why), "mok with 1 stream: %s", why);
    /* nccl-overlap: expert groups and chunks bounded by the problem */
    defaults("nccl-overlap", v);
    struct mok_params_nccl_overlap op = mok_params_nccl_overlap(v);
    op.expert_groups = 9;
    mok_params_nccl_overlap_values(&op, v);
    CHECK(!supports("nccl-overlap", &s, 2, v, why) && strstr(why, "expert_groups 9 > local experts 8"), "%s", why);
    op.expert_groups = 4, op.chunks = 64;
    mok_params_nccl_overlap_values(&op, v);
    CHECK(supports("nccl-overlap", &s, 2, v, why), "64 chunks of 256 tokens: %s", why);
    /* lsa: push needs landing; reduce=overlap needs per_rank */
    defaults("lsa", v);
    struct mok_params_lsa lp = mok_params_lsa(v);
    lp.dispatch = 1;
    mok_params_lsa_values(&lp, v);
    CHECK(!supports("lsa", &s, 2, v, why) && strstr(why, "layout=landing"), "push without landing: %s", why);
    lp.layout = 1, lp.reduce = 1, lp.combine = 0;
    mok_params_lsa_values(&lp, v);
    CHECK(!supports("lsa", &s, 2, v, why) && strstr(why, "per_rank"), "overlap with per_route: %s", why);
    /* megakernel: its tile shape, send with per_rank, own_first with pull, combine_sms above comm_sms */
    defaults("megakernel", v);
    CHECK(supports("megakernel", &s, 2, v, why), "megakernel defaults: %s", why);
    struct mok_problem_spec odd = spec_of(1088, 512, 16, 2, 256, 0);
    CHECK(!supports("megakernel", &odd, 2, v, why) && strstr(why, "multiple of 256"), "hidden 1088: %s", why);
    struct mok_params_megakernel mp = mok_params_megakernel(v);
    mp.send = 1, mp.combine = 1;
    mok_params_megakernel_values(&mp, v);
    CHECK(!supports("megakernel", &s, 2, v, why) && strstr(why, "per_route"), "send with per_rank: %s", why);
    mp.send = 0, mp.own_first = 4;
    mok_params_megakernel_values(&mp, v);
    CHECK(!supports("megakernel", &s, 2, v, why) && strstr(why, "dispatch=push"), "own_first with pull: %s", why);
    mp.own_first = 0, mp.combine_sms = 17;
    mok_params_megakernel_values(&mp, v);
    CHECK(!supports("megakernel", &s, 2, v, why) && strstr(why, "combine_sms 17 > comm_sms 16"), "%s", why);
    /* megakernel mx_scheme 1 (mxfp8 expanded to bf16): mxfp8's forward with dispatch=push only */
    defaults("megakernel", v);
    mp = mok_params_megakernel(v);
    mp.mx_scheme = 1;
    mok_params_megakernel_values(&mp, v);
    CHECK(!supports("megakernel", &s, 2, v, why) && strstr(why, "mx_scheme 1 applies to dtype mxfp8"),
          "megakernel bf16 mx_scheme 1: %s", why);
    s.dtype = MOK_DTYPE_FP8_BLOCK, mp.dispatch = 1;
    mok_params_megakernel_values(&mp, v);
    CHECK(!supports("megakernel", &s, 2, v, why) && strstr(why, "mx_scheme 1 applies to dtype mxfp8"),
          "megakernel fp8_block mx_scheme 1: %s", why);
    s.dtype = MOK_DTYPE_MXFP8;
    CHECK(supports("megakernel", &s, 2, v, why), "megakernel mxfp8 mx_scheme 1 push: %s", why);
    s.pass = MOK_PASS_FWD_BWD;
    CHECK(!supports("megakernel", &s, 2, v, why) && strstr(why, "mx_scheme 1 applies to dtype mxfp8's forward"),
          "megakernel mxfp8 fwd_bwd mx_scheme 1: %s", why);
    s.pass = MOK_PASS_FWD;
    /* land_stages: scheme (b)'s landing ring only, 2..4 */
    mp.land_stages = 3;
    mok_params_megakernel_values(&mp, v);
    CHECK(supports("megakernel", &s, 2, v, why), "megakernel mxfp8 mx_scheme 1 land_stages 3: %s", why);
    mp.mx_scheme = 0;
    mok_params_megakernel_values(&mp, v);
    CHECK(!supports("megakernel", &s, 2, v, why) && strstr(why, "land_stages 3"), "land_stages, scheme (a): %s", why);
    mp.mx_scheme = 1, mp.land_stages = 1;
    mok_params_megakernel_values(&mp, v);
    CHECK(!supports("megakernel", &s, 2, v, why) && strstr(why, "land_stages 1"), "land_stages 1: %s", why);
    /* fp8_tile_n 128: fp8_block's forward only (256, the default, is accepted everywhere) */
    defaults("megakernel", v);
    mp = mok_params_megakernel(v);
    mp.fp8_tile_n = 128, mp.dispatch = 1;
    mok_params_megakernel_values(&mp, v);
    CHECK(!supports("megakernel", &s, 2, v, why) && strstr(why, "fp8_tile_n 128"), "mxfp8 fp8_tile_n 128: %s", why);
    s.dtype = MOK_DTYPE_FP8_BLOCK;
    CHECK(supports("megakernel", &s, 2, v, why), "fp8_block fp8_tile_n 128: %s", why);
    mp.fp8_tile_n = 192;
    mok_params_megakernel_values(&mp, v);
    CHECK(!supports("megakernel", &s, 2, v, why) && strstr(why, "fp8_tile_n 192"), "fp8_tile_n 192: %s", why);
    s.dtype = MOK_DTYPE_BF16;
    /* swap_tail: the bf16 forward without split_half */
    defaults("megakernel", v);
    mp = mok_params_megakernel(v);
    mp.swap_tail = 1;
    mok_params_megakernel_values(&mp, v);
    CHECK(supports("megakernel", &s, 2, v, why), "megakernel swap_tail 1: %s", why);
    mp.split_half = 1;
    mok_params_megakernel_values(&mp, v);
    CHECK(!supports("megakernel", &s, 2, v, why) && strstr(why, "swap_tail 1"), "swap_tail with split_half: %s", why);
    mp.split_half = 0;
    mok_params_megakernel_values(&mp, v);
    s.dtype = MOK_DTYPE_MXFP8;
    CHECK(!supports("megakernel", &s, 2, v, why) && strstr(why, "swap_tail 1"), "swap_tail with mxfp8: %s", why);
    s.dtype = MOK_DTYPE_BF16, s.pass = MOK_PASS_FWD_BWD;
    CHECK(!supports("megakernel", &s, 2, v, why) && strstr(why, "swap_tail 1"), "swap_tail with fwd_bwd: %s", why);
    s.pass = MOK_PASS_FWD;
    /* gather: the bf16 forward with dispatch=push, without own_first or swap_tail (split_half allowed) */
    defaults("megakernel", v);
    mp = mok_params_megakernel(v);
    mp.gather = 1, mp.dispatch = 1, mp.split_half = 1;
    mok_params_megakernel_values(&mp, v);
    CHECK(supports("megakernel", &s, 2, v, why), "megakernel gather 1 with split_half: %s", why);
    mp.dispatch = 0;
    mok_params_megakernel_values(&mp, v);
    CHECK(!supports("megakernel", &s, 2, v, why) && strstr(why, "gather 1") && strstr(why, "dispatch pull"),
          "gather with dispatch=pull: %s", why);
    mp.dispatch = 1, mp.swap_tail = 1, mp.split_half = 0;
    mok_params_megakernel_values(&mp, v);
    CHECK(!supports("megakernel", &s, 2, v, why) && strstr(why, "gather 1"), "gather with swap_tail: %s", why);
    mp.swap_tail = 0, mp.own_first = 4;
    mok_params_megakernel_values(&mp, v);
    CHECK(!supports("megakernel", &s, 2, v, why) && strstr(why, "gather 1"), "gather with own_first: %s", why);
    mp.own_first = 0;
    mok_params_megakernel_values(&mp, v);
    s.dtype = MOK_DTYPE_FP8_BLOCK;
    CHECK(!supports("megakernel", &s, 2, v, why) && strstr(why, "gather 1"), "gather with fp8_block: %s", why);
    s.dtype = MOK_DTYPE_BF16, s.pass = MOK_PASS_BWD;
    CHECK(!supports("megakernel", &s, 2, v, why) && strstr(why, "gather 1"), "gather with bwd: %s", why);
    /* gather -1 (the default) runs wherever the megakernel does: libmok resolves it to 0 where 1 does not apply */
    mp.gather = -1, mp.combine = 0, mp.send = 1;
    mok_params_megakernel_values(&mp, v);
    CHECK(supports("megakernel", &s, 2, v, why), "gather -1 with bwd: %s", why);
    s.pass = MOK_PASS_FWD, s.dtype = MOK_DTYPE_FP8_BLOCK;
    CHECK(supports("megakernel", &s, 2, v, why), "gather -1 with fp8_block: %s", why);
    s.dtype = MOK_DTYPE_BF16;
    /* mok_layer_gather_auto: 1 below 128 routed rows per expert on average where gather applies */
    struct mok_layer_desc ld = {.experts = 384, .topk = 8, .max_tokens = 4096, .dispatch_push = 1};
    CHECK(mok_layer_gather_auto(&ld, 1) == 1, "gather auto at 85 rows per expert");
    ld.max_tokens = 6144; /* exactly 128 rows per expert */
    CHECK(mok_layer_gather_auto(&ld, 1) == 0, "gather auto at 128 rows per expert");
    ld.max_tokens = 3072; /* 64 rows per expert per rank, 128 over two ranks */
    CHECK(mok_layer_gather_auto(&ld, 1) == 1 && mok_layer_gather_auto(&ld, 2) == 0, "gather auto counts every rank");
    ld.max_tokens = 1 << 30, ld.experts = 1 << 20; /* 64-bit product */
    CHECK(mok_layer_gather_auto(&ld, 64) == 0, "gather auto without overflow");
    ld.max_tokens = 1024, ld.experts = 384;
    ld.swap_tail = 1;
    CHECK(mok_layer_gather_auto(&ld, 1) == 0, "gather auto with swap_tail");
    ld.swap_tail = 0, ld.own_first = 4;
    CHECK(mok_layer_gather_auto(&ld, 1) == 0, "gather auto with own_first");
    ld.own_first = 0, ld.dispatch_push = 0;
    CHECK(mok_layer_gather_auto(&ld, 1) == 0, "gather auto with dispatch pull");
    ld.dispatch_push = 1, ld.train = 1;
    CHECK(mok_layer_gather_auto(&ld, 1) == 0, "gather auto with train");
    ld.train = 0, ld.dtype = MOK_LAYER_MXFP8;
    CHECK(mok_layer_gather_auto(&ld, 1) == 0, "gather auto with mxfp8");
    /* pass bwd of the implementations that keep one saved forward (megakernel, lsa-layer): one input set only, said
     * without a GPU (the dry run's verdict is the run's); fwd_bwd and nccl's bwd run any count */
    defaults("megakernel", v);
    mp = mok_params_megakernel(v);
    mp.dispatch = 1, mp.combine = 0, mp.send = 1;
    mok_params_megakernel_values(&mp, v);
    s.pass = MOK_PASS_BWD;
    const struct mok_impl_desc *mk = mok_impl_desc_find("megakernel");
    CHECK(mok_impl_host_supports(mk, &s, 2, 1, v, why, 256), "megakernel bwd, 1 set: %s", why);
    CHECK(!mok_impl_host_supports(mk, &s, 2, 3, v, why, 256) && strstr(why, "one saved forward") &&
              strstr(why, "rotates 3"), "megakernel bwd, 3 sets: %s", why);
    s.pass = MOK_PASS_FWD_BWD;
    CHECK(mok_impl_host_supports(mk, &s, 2, 3, v, why, 256), "megakernel fwd_bwd, 3 sets: %s", why);
    s.pass = MOK_PASS_BWD;
    defaults("lsa-layer", v);
    v[mok_impl_param_index(mok_impl_desc_find("lsa-layer"), "combine")] = 0; /* per_route */
    CHECK(mok_impl_host_supports(mok_impl_desc_find("lsa-layer"), &s, 2, 1, v, why, 256), "lsa-layer bwd: %s", why);
    CHECK(!mok_impl_host_supports(mok_impl_desc_find("lsa-layer"), &s, 2, 3, v, why, 256) &&
              strstr(why, "one saved forward"), "lsa-layer bwd, 3 sets: %s", why);
    /* wgrad_reduce: fp32 gradients of the backward only; its default (1) is accepted elsewhere, 0 refused there */
    defaults("megakernel", v);
    mp = mok_params_megakernel(v);
    CHECK(mp.wgrad_reduce == 1, "megakernel wgrad_reduce defaults to 1: %d", mp.wgrad_reduce);
    mp.dispatch = 1, mp.combine = 0, mp.send = 1;
    mok_params_megakernel_values(&mp, v);
    s.wgrad = MOK_WGRAD_FP32_ACCUMULATE;
    CHECK(mok_impl_host_supports(mk, &s, 2, 1, v, why, 256), "megakernel wgrad_reduce 1, fp32: %s", why);
    s.wgrad = MOK_WGRAD_BF16;
    CHECK(mok_impl_host_supports(mk, &s, 2, 1, v, why, 256), "megakernel wgrad_reduce 1 (default), bf16: %s", why);
    s.pass = MOK_PASS_FWD;
    CHECK(mok_impl_host_supports(mk, &s, 2, 1, v, why, 256), "megakernel wgrad_reduce 1 (default), fwd: %s", why);
    mp.wgrad_reduce = 0;
    mok_params_megakernel_values(&mp, v);
    s.pass = MOK_PASS_BWD, s.wgrad = MOK_WGRAD_FP32_ACCUMULATE;
    CHECK(mok_impl_host_supports(mk, &s, 2, 1, v, why, 256), "megakernel wgrad_reduce 0, fp32: %s", why);
    s.wgrad = MOK_WGRAD_BF16;
    CHECK(!mok_impl_host_supports(mk, &s, 2, 1, v, why, 256) && strstr(why, "wgrad_reduce 0 applies to wgrad "
          "fp32_accumulate") && strstr(why, "leave it at 1"), "megakernel wgrad_reduce 0, bf16 gradients: %s", why);
    s.wgrad = MOK_WGRAD_FP32_ACCUMULATE, s.pass = MOK_PASS_FWD;
    CHECK(!mok_impl_host_supports(mk, &s, 2, 1, v, why, 256) && strstr(why, "wgrad_reduce=0 (leave it at 1) applies "
          "to the backward"), "megakernel wgrad_reduce 0, fwd: %s", why);
    /* wgrad_mix: -1 (the default) resolves by the gradients' type; 0 and 1 are refused in the forward */
    defaults("megakernel", v);
    mp = mok_params_megakernel(v);
    CHECK(mp.wgrad_mix == -1, "megakernel wgrad_mix defaults to -1: %d", mp.wgrad_mix);
    mp.dispatch = 1, mp.combine = 0, mp.send = 1, mp.wgrad_mix = 1;
    mok_params_megakernel_values(&mp, v);
    CHECK(!mok_impl_host_supports(mk, &s, 2, 1, v, why, 256) && strstr(why, "wgrad_mix 0 or 1 (leave it at -1) "
          "applies to the backward"), "megakernel wgrad_mix 1, fwd: %s", why);
    s.pass = MOK_PASS_BWD, s.wgrad = MOK_WGRAD_BF16;
    CHECK(mok_impl_host_supports(mk, &s, 2, 1, v, why, 256), "megakernel wgrad_mix 1, bf16 gradients: %s", why);
    s.wgrad = MOK_WGRAD_FP32_ACCUMULATE;
    s.pass = MOK_PASS_BWD;
    defaults("nccl", v);
    v[mok_impl_param_index(mok_impl_desc_find("nccl"), "gemm")] = 1;
    CHECK(mok_impl_host_supports(mok_impl_desc_find("nccl"), &s, 2, 3, v, why, 256), "nccl bwd, 3 sets: %s", why);
    s.pass = MOK_PASS_FWD;
    /* mok-gemm: 64-row tiles need tile_n 256 and no cluster */
    s.mode = MOK_MODE_GEMM;
    defaults("mok-gemm", v);
    struct mok_params_mok_gemm gp = mok_params_mok_gemm(v);
    gp.tile_m = 64;
    mok_params_mok_gemm_values(&gp, v);
    CHECK(!supports("mok-gemm", &s, 1, v, why) && strstr(why, "tile_n 256"), "64 x 128: %s", why);
    gp.tile_n = 256;
    mok_params_mok_gemm_values(&gp, v);
    CHECK(supports("mok-gemm", &s, 1, v, why), "64 x 256: %s", why);
    gp.cluster = 2;
    mok_params_mok_gemm_values(&gp, v);
    CHECK(!supports("mok-gemm", &s, 1, v, why) && strstr(why, "cluster 1"), "64 x 256 in clusters: %s", why);
    /* mok-gemm's backward on the GEMM core: bf16, sm90, 128-row tiles without clusters or lockstep */
    s.pass = MOK_PASS_BWD;
    defaults("mok-gemm", v);
    CHECK(supports("mok-gemm", &s, 1, v, why), "mok-gemm bwd defaults: %s", why);
    gp = mok_params_mok_gemm(v);
    gp.tile_m = 64, gp.tile_n = 256;
    mok_params_mok_gemm_values(&gp, v);
    CHECK(!supports("mok-gemm", &s, 1, v, why) && strstr(why, "128-row tiles"), "mok-gemm bwd 64-row tiles: %s", why);
    defaults("mok-gemm", v);
    gp = mok_params_mok_gemm(v);
    gp.kernel = 1;
    mok_params_mok_gemm_values(&gp, v);
    CHECK(!supports("mok-gemm", &s, 1, v, why) && strstr(why, "kernel=sm90"), "mok-gemm bwd portable: %s", why);
    s.pass = MOK_PASS_FWD;
    /* the NCCL baselines' backward: per expert or on mok's core, not on cuBLAS grouped */
    s.mode = MOK_MODE_LAYER, s.pass = MOK_PASS_FWD_BWD;
    defaults("nccl", v);
    struct mok_params_nccl nb = mok_params_nccl(v);
    nb.gemm = 2, nb.gemm_streams = 1;
    mok_params_nccl_values(&nb, v);
    CHECK(supports("nccl", &s, 2, v, why), "nccl fwd_bwd gemm=mok: %s", why);
    nb.gemm = 0;
    mok_params_nccl_values(&nb, v);
    CHECK(!supports("nccl", &s, 2, v, why) && strstr(why, "not cuBLAS grouped"), "nccl fwd_bwd grouped: %s", why);
    s.mode = MOK_MODE_GEMM, s.pass = MOK_PASS_FWD;
    /* the fused backward: push dispatch, per-route combine and sends from the GEMM epilogue; intermediate in 256s;
     * act=recompute only where there is a backward */
    s.mode = MOK_MODE_LAYER, s.pass = MOK_PASS_BWD;
    defaults("megakernel", v);
    CHECK(!supports("megakernel", &s, 2, v, why) && strstr(why, "dispatch=push, combine=per_route, send=1"),
          "megakernel bwd defaults: %s", why);
    struct mok_params_megakernel mb = mok_params_megakernel(v);
    mb.dispatch = 1, mb.combine = 0, mb.send = 1;
    mok_params_megakernel_values(&mb, v);
    int inter = s.model.intermediate;
    s.model.intermediate = 256;
    CHECK(supports("megakernel", &s, 2, v, why), "megakernel bwd push/per_route/send: %s", why);
    s.model.intermediate = 384;
    CHECK(!supports("megakernel", &s, 2, v, why) && strstr(why, "multiple of 256"), "megakernel bwd I 384: %s", why);
    s.model.intermediate = 256, s.pass = MOK_PASS_FWD, mb.act = 1;
    mok_params_megakernel_values(&mb, v);
    CHECK(!supports("megakernel", &s, 2, v, why) && strstr(why, "act=recompute applies to the backward"),
          "megakernel fwd act=recompute: %s", why);
    /* shared_sms: the shared experts' backward beside the kernel; a backward with shared experts only */
    mb.act = 0, mb.shared_sms = 8;
    mok_params_megakernel_values(&mb, v);
    CHECK(!supports("megakernel", &s, 2, v, why) && strstr(why, "shared_sms applies to the backward"),
          "megakernel fwd shared_sms: %s", why);
    s.pass = MOK_PASS_FWD_BWD;
    CHECK(!supports("megakernel", &s, 2, v, why) && strstr(why, "shared experts (this model has none)"),
          "megakernel fwd_bwd shared_sms, no shared experts: %s", why);
    s.model.shared_experts = 1;
    CHECK(supports("megakernel", &s, 2, v, why), "megakernel fwd_bwd shared_sms 8: %s", why);
    mb.shared_sms = 120;
    mok_params_megakernel_values(&mb, v);
    CHECK(!supports("megakernel", &s, 2, v, why) && strstr(why, "exceed"), "megakernel shared_sms 120: %s", why);
    /* shared_units: the shared experts' backward inside the kernel; not with shared_sms, not in the forward */
    mb.shared_sms = 8, mb.shared_units = 1;
    mok_params_megakernel_values(&mb, v);
    CHECK(!supports("megakernel", &s, 2, v, why) && strstr(why, "not both"), "megakernel shared_units + sms: %s", why);
    mb.shared_sms = 0;
    mok_params_megakernel_values(&mb, v);
    CHECK(supports("megakernel", &s, 2, v, why), "megakernel fwd_bwd shared_units 1: %s", why);
    s.model.shared_experts = 0;
    CHECK(!supports("megakernel", &s, 2, v, why) && strstr(why, "shared_units 1 applies to shared experts"),
          "megakernel fwd_bwd shared_units, no shared experts: %s", why);
    s.model.shared_experts = 1, s.pass = MOK_PASS_FWD;
    CHECK(!supports("megakernel", &s, 2, v, why) && strstr(why, "shared_units applies to the backward"),
          "megakernel fwd shared_units: %s", why);
    mb.shared_units = 0;
    mok_params_megakernel_values(&mb, v);
    s.model.shared_experts = 0, s.pass = MOK_PASS_FWD;
    s.model.intermediate = inter;
    /* fp8_block in layer mode: the NCCL baselines' forward on cuBLASLt per expert or mok's core, not cuBLAS grouped;
     * the megakernel's forward with dispatch=push (shared experts in bf16); lsa-layer's on mok's core
     * (lsa_fp8_checks) */
    s.pass = MOK_PASS_FWD, s.dtype = MOK_DTYPE_FP8_BLOCK;
    defaults("nccl", v);
    struct mok_params_nccl fnp = mok_params_nccl(v);
    const int fp8_gemm[3][2] = {{0, 0}, {1, 1}, {2, 1}}; /* grouped, per_expert, mok: supported? */
    for (int i = 0; i < 3; i++) {
        fnp.gemm = fp8_gemm[i][0], fnp.gemm_streams = 1;
        mok_params_nccl_values(&fnp, v);
        CHECK(supports("nccl", &s, 2, v, why) == fp8_gemm[i][1] && (fp8_gemm[i][1] || strstr(why, "no grouped")),
              "nccl fp8_block gemm %d: %s", fnp.gemm, why);
    }
    s.pass = MOK_PASS_FWD_BWD;
    CHECK(!supports("nccl", &s, 2, v, why) && strstr(why, "the forward only"), "nccl fp8_block fwd_bwd: %s", why);
    s.pass = MOK_PASS_FWD;
    defaults("megakernel", v);
    struct mok_params_megakernel fmp = mok_params_megakernel(v);
    CHECK(!supports("megakernel", &s, 2, v, why) && strstr(why, "dispatch=push"), "megakernel fp8_block pull: %s",
          why);
    fmp.dispatch = 1;
    mok_params_megakernel_values(&fmp, v);
    CHECK(supports("megakernel", &s, 2, v, why), "megakernel fp8_block push: %s", why);
    s.model.shared_experts = 1; /* their tiles stay bf16, as in the baselines */
    CHECK(supports("megakernel", &s, 2, v, why), "megakernel fp8_block shared: %s", why);
    s.model.shared_experts = 0;
    lsa_fp8_checks(&s, v, why);
    /* mxfp8: gemm mode's mok-gemm (sm90, no cluster or lockstep) and cublas-gemm (emulated) run it; in layer mode
     * the NCCL baselines, on mok's core or emulated on any cuBLAS mode, lsa-layer and the megakernel, the forward
     * only */
    s.pass = MOK_PASS_FWD, s.dtype = MOK_DTYPE_MXFP8;
    defaults("nccl", v);
    fnp = mok_params_nccl(v);
    for (int g = 0; g < 3; g++) { /* grouped, per_expert, mok */
        fnp.gemm = g, fnp.gemm_streams = 1;
        mok_params_nccl_values(&fnp, v);
        CHECK(supports("nccl", &s, 2, v, why), "nccl mxfp8 gemm %d: %s", g, why);
    }
    defaults("nccl-overlap", v);
    CHECK(supports("nccl-overlap", &s, 2, v, why), "nccl-overlap mxfp8 defaults: %s", why);
    s.pass = MOK_PASS_BWD;
    CHECK(!supports("nccl-overlap", &s, 2, v, why) && strstr(why, "mxfp8: the forward only"), "nccl-overlap mxfp8 "
          "bwd: %s", why);
    s.pass = MOK_PASS_FWD;
    s.model.intermediate = 192;
    defaults("nccl", v);
    CHECK(!supports("nccl", &s, 2, v, why) && strstr(why, "multiples of 128"), "nccl mxfp8 inter 192: %s", why);
    s.model.intermediate = 512;
    defaults("megakernel", v);
    fmp = mok_params_megakernel(v);
    CHECK(!supports("megakernel", &s, 2, v, why) && strstr(why, "dispatch=push"), "megakernel mxfp8 pull: %s", why);
    fmp.dispatch = 1;
    mok_params_megakernel_values(&fmp, v);
    CHECK(supports("megakernel", &s, 2, v, why), "megakernel mxfp8 push: %s", why);
    lsa_fp8_checks(&s, v, why);
    s.mode = MOK_MODE_GEMM;
    defaults("cublas-gemm", v);
    CHECK(supports("cublas-gemm", &s, 1, v, why), "cublas-gemm mxfp8 defaults: %s", why);
    /* the grouped emulation too (its GEMM1 and GEMM2 calls on pointer-array batches of their own), one stream */
    struct mok_params_cublas_gemm cgp = mok_params_cublas_gemm(v);
    cgp.gemm = 0, cgp.gemm_streams = 1;
    mok_params_cublas_gemm_values(&cgp, v);
    CHECK(supports("cublas-gemm", &s, 1, v, why), "cublas-gemm mxfp8 grouped: %s", why);
    cgp.gemm_streams = 4;
    mok_params_cublas_gemm_values(&cgp, v);
    CHECK(!supports("cublas-gemm", &s, 1, v, why) && strstr(why, "gemm=grouped"), "cublas-gemm mxfp8 grouped, 4 "
          "streams: %s", why);
    defaults("cublas-gemm", v);
    s.pass = MOK_PASS_BWD;
    CHECK(!supports("cublas-gemm", &s, 1, v, why) && strstr(why, "mxfp8: the forward only"), "cublas-gemm mxfp8 "
          "bwd: %s", why);
    s.pass = MOK_PASS_FWD;
    defaults("mok-gemm", v);
    gp = mok_params_mok_gemm(v);
    CHECK(supports("mok-gemm", &s, 1, v, why), "mok-gemm mxfp8 defaults: %s", why);
    gp.fp8_n = 64;
    mok_params_mok_gemm_values(&gp, v);
    CHECK(supports("mok-gemm", &s, 1, v, why), "mok-gemm mxfp8 fp8_n 64: %s", why);
    gp.cluster = 2;
    mok_params_mok_gemm_values(&gp, v);
    CHECK(!supports("mok-gemm", &s, 1, v, why) && strstr(why, "without lockstep or clusters"), "mxfp8 cluster 2: %s",
          why);
    gp.cluster = 1, gp.tile_n = 256;
    mok_params_mok_gemm_values(&gp, v);
    CHECK(!supports("mok-gemm", &s, 1, v, why) && strstr(why, "128 x 128"), "mxfp8 128 x 256: %s", why);
    gp.tile_n = 128, gp.kernel = 1;
    mok_params_mok_gemm_values(&gp, v);
    CHECK(!supports("mok-gemm", &s, 1, v, why) && strstr(why, "kernel=sm90"), "mxfp8 portable: %s", why);
    /* mx_scheme 1 (expanded to bf16): 128 x 128 and 128 x 256 tiles without clusters or lockstep, fp8_n at its
     * default; refused for the other dtypes and the backward (one candidate per configuration they run) */
    const int mx_tiles[6][5] = {{128, 128, 1, 128, 1}, {128, 256, 1, 128, 1}, {128, 256, 2, 128, 0},
                                {64, 256, 1, 128, 0}, {256, 128, 1, 128, 0}, {128, 256, 1, 64, 0}};
    for (int i = 0; i < 6; i++) { /* tile_m, tile_n, cluster, fp8_n, supported */
        defaults("mok-gemm", v);
        gp = mok_params_mok_gemm(v);
        gp.mx_scheme = 1, gp.tile_m = mx_tiles[i][0], gp.tile_n = mx_tiles[i][1], gp.cluster = mx_tiles[i][2];
        gp.fp8_n = mx_tiles[i][3];
        mok_params_mok_gemm_values(&gp, v);
        CHECK(supports("mok-gemm", &s, 1, v, why) == mx_tiles[i][4], "mok-gemm mxfp8 mx_scheme 1 %d x %d cluster %d "
              "fp8_n %d: %s", gp.tile_m, gp.tile_n, gp.cluster, gp.fp8_n, why);
    }
    defaults("mok-gemm", v);
    gp = mok_params_mok_gemm(v);
    gp.mx_scheme = 1, gp.lockstep_k = 4;
    mok_params_mok_gemm_values(&gp, v);
    CHECK(!supports("mok-gemm", &s, 1, v, why) && strstr(why, "mx_scheme 1"), "mxfp8 mx_scheme 1 lockstep: %s", why);
    gp.lockstep_k = 0;
    mok_params_mok_gemm_values(&gp, v);
    s.dtype = MOK_DTYPE_FP8_BLOCK;
    CHECK(!supports("mok-gemm", &s, 1, v, why) && strstr(why, "mx_scheme 1 applies to dtype mxfp8"),
          "fp8_block mx_scheme 1: %s", why);
    s.dtype = MOK_DTYPE_BF16;
    CHECK(!supports("mok-gemm", &s, 1, v, why) && strstr(why, "mx_scheme 1 applies to dtype mxfp8"),
          "bf16 mx_scheme 1: %s", why);
    s.dtype = MOK_DTYPE_MXFP8, s.pass = MOK_PASS_BWD;
    CHECK(!supports("mok-gemm", &s, 1, v, why) && strstr(why, "mx_scheme 1 applies to dtype mxfp8's forward"),
          "mxfp8 bwd mx_scheme 1: %s", why);
    s.pass = MOK_PASS_FWD;
    /* fp8_block: mok-gemm's 128 x 128 tiles, and 128 x 256 without clusters (either layout); not 64 or 256 rows */
    s.dtype = MOK_DTYPE_FP8_BLOCK;
    const int fp8_tiles[5][4] = {{128, 128, 1, 1}, {128, 256, 1, 1}, {128, 256, 2, 0}, {256, 128, 1, 0},
                                 {64, 256, 1, 0}}; /* tile_m, tile_n, cluster, supported */
    for (int i = 0; i < 5; i++) {
        defaults("mok-gemm", v);
        gp = mok_params_mok_gemm(v);
        gp.tile_m = fp8_tiles[i][0], gp.tile_n = fp8_tiles[i][1], gp.cluster = fp8_tiles[i][2];
        mok_params_mok_gemm_values(&gp, v);
        CHECK(supports("mok-gemm", &s, 1, v, why) == fp8_tiles[i][3], "mok-gemm fp8_block %d x %d cluster %d: %s",
              gp.tile_m, gp.tile_n, gp.cluster, why);
        gp.lean = 1; /* the lean layout: fp8_block's 128 x 256 tiles only */
        mok_params_mok_gemm_values(&gp, v);
        CHECK(supports("mok-gemm", &s, 1, v, why) == (fp8_tiles[i][3] && gp.tile_n == 256),
              "mok-gemm fp8_block lean %d x %d cluster %d: %s", gp.tile_m, gp.tile_n, gp.cluster, why);
    }
    defaults("mok-gemm", v);
    gp = mok_params_mok_gemm(v);
    gp.lean = 1, gp.tile_n = 256;
    mok_params_mok_gemm_values(&gp, v);
    s.dtype = MOK_DTYPE_BF16;
    CHECK(!supports("mok-gemm", &s, 1, v, why) && strstr(why, "lean 1"), "bf16 lean: %s", why);
    s.dtype = MOK_DTYPE_MXFP8;
    struct mok_problem_spec odd_mx = spec_of(192, 128, 8, 2, 64, 0);
    odd_mx.mode = MOK_MODE_GEMM, odd_mx.dtype = MOK_DTYPE_MXFP8;
    defaults("mok-gemm", v);
    CHECK(!supports("mok-gemm", &odd_mx, 1, v, why) && strstr(why, "multiples of 128"), "mxfp8 hidden 192: %s", why);
    defaults("cublas-gemm", v);
    CHECK(!supports("cublas-gemm", &odd_mx, 1, v, why) && strstr(why, "multiples of 128"), "mxfp8 hidden 192: %s", why);
    s.dtype = MOK_DTYPE_BF16;
    /* the longest label each implementation can write (longest choice; the widest integer of each range) fits the
     * report's params field: a cut label once hid split_half from a report */
    for (int i = 0; i < mok_impl_desc_count(); i++) {
        const struct mok_impl_desc *d = mok_impl_desc_at(i);
        for (int j = 0; j < d->nparams; j++) {
            const struct mok_param_def *pd = &d->params[j];
            int best = 0, longest = 0;
            for (int c = 0; pd->choices && c < pd->nchoices; c++)
                if ((int)strlen(pd->choices[c]) > longest)
                    longest = (int)strlen(pd->choices[c]), best = c;
            v[j] = pd->choices ? best : (snprintf(NULL, 0, "%d", pd->min) > snprintf(NULL, 0, "%d", pd->max) ? pd->min
                                                                                                          : pd->max);
        }
        char label[MOK_PARAMS_LABEL_LEN];
        int need = mok_impl_params_label_len(d, v, label, (int)sizeof(label));
        CHECK(need < (int)sizeof(label), "%s: longest params label %d chars, room for %d", d->name, need,
              (int)sizeof(label) - 1);
    }
    printf("%s\n", failures ? "test_params: FAILED" : "test_params: all passed");
    return failures ? 1 : 0;
}
