/* test_plan: the input sets a problem rotates, as the dry run and the run both count them (src/plan.c
 * mok_plan_set_bytes, mok_plan_input_sets): one set's bytes per mode, the count against L2, timing.input_sets. */
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

    printf("test_plan: %s\n", failures ? "FAILED" : "all passed");
    return failures ? 1 : 0;
}
