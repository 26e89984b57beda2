/* test_roofline: the bytes and FLOPs a problem must move, against the ceilings, on numbers worked by hand. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "roofline.h"

#include "check.h"

static int close_to(double a, double b) { return fabs(a - b) <= 1e-9 * fabs(b); }

int main(void)
{
    /* issue 19's example: 7168 / 3072 / 384 experts / top-6 at 4096 tokens on one GPU, every expert routed to */
    struct mok_problem_spec s = {.mode = MOK_MODE_LAYER, .tokens_per_rank = 4096,
                                 .model = {"x", 7168, 3072, 384, 6, 0}};
    int32_t rows[384];
    for (int e = 0; e < 384; e++)
        rows[e] = 64; /* 24576 routes = 4096 x 6 */
    struct mok_roofline r;
    mok_roofline_of(&s, 1, 0, rows, 4800, 650, 650, &r);
    double w = 384.0 * 3 * 7168 * 3072 * 2; /* 50.7 GB, as the issue says */
    CHECK(close_to(r.weight_bytes, w) && fabs(w / 1e9 - 50.7) < 0.05, "weights %.4g", r.weight_bytes);
    CHECK(close_to(r.act_bytes, 24576.0 * (7168 + 3072 + 3072 + 7168) * 2), "activations %.4g", r.act_bytes);
    CHECK(close_to(r.flops, 24576.0 * 6 * 7168 * 3072), "flops %.4g", r.flops);
    CHECK(close_to(r.mem_us, (r.weight_bytes + r.act_bytes) / 4800e9 * 1e6) && fabs(r.mem_us / 1e3 - 10.6) < 0.2,
          "mem %.1f us (the issue: 10.6 ms at 4.8 TB/s)", r.mem_us);
    CHECK(close_to(r.gemm_us, r.flops / 650e12 * 1e6) && r.bound_us == r.mem_us, "weight-bound: %.1f vs %.1f us",
          r.mem_us, r.gemm_us);

    /* two ranks: rank 1 holds experts 192..383; an expert with no rows is never read */
    rows[200] = 0;
    mok_roofline_of(&s, 2, 1, rows, 4800, 650, 650, &r);
    CHECK(close_to(r.weight_bytes, 191.0 * 3 * 7168 * 3072 * 2), "rank 1's routed experts: %.4g", r.weight_bytes);
    CHECK(close_to(r.act_bytes, 191.0 * 64 * (7168 + 3072 + 3072 + 7168) * 2), "rank 1's rows");

    /* shared experts add one MLP over the rank's own tokens; without --probe the times are NaN */
    s.model.shared_experts = 1;
    mok_roofline_of(&s, 1, 0, rows, 0, 650, 650, &r);
    CHECK(isnan(r.mem_us) && isnan(r.bound_us) && !isnan(r.gemm_us), "no DRAM figure: mem and bound NaN");
    CHECK(close_to(r.flops, (24576.0 - 64 + 4096) * 6 * 7168 * 3072), "shared flops %.4g", r.flops);
    /* ... and in a training step their backward too: twice their forward's FLOPs, their weights read by dgrad, their
     * fp32 gradient read and written, their rows' backward traffic */
    s.pass = MOK_PASS_FWD_BWD;
    mok_roofline_of(&s, 1, 0, rows, 0, 650, 650, &r);
    const double sw = 3.0 * 7168 * 3072, routed_w = 383.0 * 3 * 7168 * 3072;
    CHECK(close_to(r.flops, (24576.0 - 64 + 4096) * 3 * 6 * 7168 * 3072), "fwd_bwd shared flops %.4g", r.flops);
    CHECK(close_to(r.grad_bytes, (routed_w + sw) * 4 * 2), "fwd_bwd shared gradients %.4g", r.grad_bytes);
    CHECK(close_to(r.weight_bytes, (routed_w + sw) * (2 * 2 + 4 * 2)), "fwd_bwd shared weights %.4g", r.weight_bytes);
    CHECK(close_to(r.act_bytes, (24576.0 - 64) * ((7168 + 3072 + 3072 + 7168) + 4 * 7168 + 12 * 3072) * 2 +
                                    4096.0 * ((7168 + 2 * 3072 + 7168) + 4 * 7168 + 12 * 3072) * 2),
          "fwd_bwd shared rows %.4g", r.act_bytes);
    s.pass = MOK_PASS_FWD;
    /* an FP8 layer: its routed GEMMs at the FP8 rate, its shared expert's (bf16) at bf16's; without a bf16 figure
     * there is no GEMM time */
    s.dtype = MOK_DTYPE_FP8_BLOCK;
    mok_roofline_of(&s, 1, 0, rows, 4800, 1000, 650, &r);
    const double fp8_routed = (24576.0 - 64) * 6 * 7168 * 3072, fp8_shared = 4096.0 * 6 * 7168 * 3072;
    CHECK(close_to(r.flops, fp8_routed + fp8_shared), "fp8 shared flops %.4g", r.flops);
    CHECK(close_to(r.gemm_us, (fp8_routed / 1000e12 + fp8_shared / 650e12) * 1e6), "fp8 gemm %.1f us", r.gemm_us);
    mok_roofline_of(&s, 1, 0, rows, 4800, 1000, 0, &r);
    CHECK(isnan(r.gemm_us) && isnan(r.bound_us) && !isnan(r.mem_us), "fp8 with shared experts, no bf16 rate");
    s.dtype = MOK_DTYPE_BF16;

    /* gemm mode: every expert, the rank's own routes; comm mode: nothing */
    s.mode = MOK_MODE_GEMM, s.model.shared_experts = 0;
    mok_roofline_of(&s, 2, 1, rows, 4800, 650, 650, &r);
    CHECK(close_to(r.weight_bytes, 383.0 * 3 * 7168 * 3072 * 2), "gemm mode: all routed experts");
    /* the backward (gemm mode): the weights read again plus the fp32 gradients read and written, the rows'
     * activations (dy 4 reads and writes of h, 12 of i: src/roofline.c), twice the forward's FLOPs */
    s.pass = MOK_PASS_BWD;
    mok_roofline_of(&s, 1, 0, rows, 4800, 650, 650, &r);
    double routed = 383.0 * 3 * 7168 * 3072;
    CHECK(close_to(r.weight_bytes, routed * 2 + routed * 4 * 2), "backward: weights and gradients %.4g",
          r.weight_bytes);
    CHECK(close_to(r.grad_bytes, routed * 4 * 2), "backward: the fp32 gradients read and written %.4g", r.grad_bytes);
    CHECK(close_to(r.act_bytes, 383.0 * 64 * (4 * 7168 + 12 * 3072) * 2), "backward: activations %.4g", r.act_bytes);
    CHECK(close_to(r.flops, 383.0 * 64 * 2 * 6 * 7168 * 3072), "backward: flops %.4g", r.flops);
    /* a training step: both, the weights read by the forward and again by dgrad */
    s.pass = MOK_PASS_FWD_BWD;
    mok_roofline_of(&s, 1, 0, rows, 4800, 650, 650, &r);
    CHECK(close_to(r.weight_bytes, routed * 2 * 2 + routed * 4 * 2), "fwd_bwd: weights %.4g", r.weight_bytes);
    CHECK(close_to(r.flops, 383.0 * 64 * 3 * 6 * 7168 * 3072), "fwd_bwd: flops %.4g", r.flops);
    /* bf16 weight gradients: written once, two bytes each */
    s.wgrad = MOK_WGRAD_BF16;
    mok_roofline_of(&s, 1, 0, rows, 4800, 650, 650, &r);
    CHECK(close_to(r.weight_bytes, routed * 2 * 2 + routed * 2), "fwd_bwd, wgrad bf16: weights %.4g", r.weight_bytes);
    CHECK(close_to(r.grad_bytes, routed * 2), "fwd_bwd, wgrad bf16: gradients written %.4g", r.grad_bytes);
    s.wgrad = MOK_WGRAD_FP32_ACCUMULATE;
    s.pass = MOK_PASS_FWD;
    s.mode = MOK_MODE_COMM;
    mok_roofline_of(&s, 1, 0, rows, 4800, 650, 650, &r);
    CHECK(isnan(r.weight_bytes) && isnan(r.bound_us), "comm mode: no roofline");
    printf("%s\n", failures ? "test_roofline: FAILED" : "test_roofline: all passed");
    return failures ? 1 : 0;
}
