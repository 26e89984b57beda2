/* test_plan: the input sets a problem rotates, as the dry run and the run both count them (src/plan.c
 * mok_plan_set_bytes, mok_plan_input_sets): one set's bytes per mode, the count against L2, timing.input_sets;
 * the parts the backward's weight-gradient reference is built in and the host memory that holds it. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "config.h"
#include "plan.h"

#include "check.h"

int main(void)
{
    struct mok_problem_spec s;
    memset(&s, 0, sizeof s);
    s.model = (struct mok_model){.hidden = 64, .intermediate = 32, .experts = 8, .topk = 2, .shared_experts = 1};
    s.tokens_per_rank = 100;
    const double x = 100.0 * 64 * 2, w = 3.0 * 64 * 32 * 2, rows = 100.0 * 2 * 64 * 2;

    /* layer mode: the tokens, this rank's experts and the shared experts */
    s.mode = MOK_MODE_LAYER;
    CHECK(mok_plan_set_bytes(&s, 2) == x + 4 * w + w, "layer, 2 ranks: %.0f", mok_plan_set_bytes(&s, 2));
    /* gemm mode: every expert on every rank (its own routes over all of them) and the gathered rows */
    s.mode = MOK_MODE_GEMM;
    CHECK(mok_plan_set_bytes(&s, 2) == x + 8 * w + w + rows, "gemm, 2 ranks: %.0f", mok_plan_set_bytes(&s, 2));
    /* comm mode: the tokens only */
    s.mode = MOK_MODE_COMM;
    CHECK(mok_plan_set_bytes(&s, 2) == x, "comm: %.0f", mok_plan_set_bytes(&s, 2));

    /* the count: enough sets to exceed L2 twice, 1..MOK_MAX_SETS; the config's count wins, clamped */
    s.mode = MOK_MODE_GEMM;
    const double set = mok_plan_set_bytes(&s, 1);
    const long long l2 = 1 << 20;
    const int want = (int)ceil(2.0 * l2 / set);
    CHECK(mok_plan_input_sets(&s, set, l2) == (want > MOK_MAX_SETS ? MOK_MAX_SETS : want), "sets %d, want %d",
          mok_plan_input_sets(&s, set, l2), want);
    CHECK(mok_plan_input_sets(&s, 1e12, l2) == 1, "a set larger than L2: %d", mok_plan_input_sets(&s, 1e12, l2));
    CHECK(mok_plan_input_sets(&s, 1.0, l2) == MOK_MAX_SETS, "a tiny set: %d", mok_plan_input_sets(&s, 1.0, l2));
    s.input_sets = 3;
    CHECK(mok_plan_input_sets(&s, 1.0, l2) == 3, "timing.input_sets 3: %d", mok_plan_input_sets(&s, 1.0, l2));

    /* the weight gradients' reference: parts of at most a quarter of the local experts and 2 GiB, at least one
     * expert; held in pinned host memory (fp32) only for the layers' backward with checks on */
    CHECK(mok_plan_ref_part_experts(8, 64, 32) == 2, "8 small experts: %d", mok_plan_ref_part_experts(8, 64, 32));
    CHECK(mok_plan_ref_part_experts(1, 64, 32) == 1, "1 expert: %d", mok_plan_ref_part_experts(1, 64, 32));
    CHECK(mok_plan_ref_part_experts(5, 64, 32) == 2, "5 experts: %d", mok_plan_ref_part_experts(5, 64, 32));
    /* DeepSeek-V3's experts: 176 MB of fp32 gradients each, 12 in 2 GiB */
    CHECK(mok_plan_ref_part_experts(256, 7168, 2048) == 12, "256 DeepSeek-V3 experts: %d",
          mok_plan_ref_part_experts(256, 7168, 2048));
    CHECK(mok_plan_ref_part_experts(1, 1 << 16, 1 << 14) == 1, "one expert over 2 GiB: %d",
          mok_plan_ref_part_experts(1, 1 << 16, 1 << 14));
    s.mode = MOK_MODE_LAYER;
    s.pass = MOK_PASS_BWD;
    CHECK(mok_plan_layer_bwd_host_bytes(&s, 2, true) == (4 + 1) * 3 * 64 * 32 * 4, "host bytes, 2 ranks: %zu",
          mok_plan_layer_bwd_host_bytes(&s, 2, true));
    CHECK(mok_plan_layer_bwd_host_bytes(&s, 2, false) == 0, "host bytes without checks");
    s.pass = MOK_PASS_FWD;
    CHECK(mok_plan_layer_bwd_host_bytes(&s, 2, true) == 0, "host bytes of a forward");
    s.pass = MOK_PASS_BWD;
    s.mode = MOK_MODE_GEMM;
    CHECK(mok_plan_layer_bwd_host_bytes(&s, 2, true) == 0, "host bytes in gemm mode (its references stay on the GPU)");

    printf("test_plan: %s\n", failures ? "FAILED" : "all passed");
    return failures ? 1 : 0;
}
