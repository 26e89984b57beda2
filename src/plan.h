/* plan: what a config will run, without a GPU: problems x implementations x candidates and the device memory
 * each rank will need. --dry-run prints it; every rank computes it and they compare its hash. */
#ifndef MOK_PLAN_H
#define MOK_PLAN_H

#include <stdint.h>
#include <stdio.h>

#include "config.h"

/* L2 assumed for input rotation when no GPU can be asked (an H200 has 60 MiB). */
#define MOK_PLAN_ASSUMED_L2_BYTES (60ll << 20)

/* The input sets a problem rotates: timing.input_sets where the config sets it, else as many sets of set_bytes as
 * exceed L2 twice, 1..MOK_MAX_SETS (src/problem.c's allocation and the dry run both ask here). */
int mok_plan_input_sets(const struct mok_problem_spec *spec, double set_bytes, long long l2_bytes);
/* One input set's bytes on a rank, what mok_plan_input_sets weighs against L2 (the dry run and src/problem.c's
 * allocation both ask here): the tokens, and but in comm mode the experts' weights (the local ones; gemm mode: every
 * expert's, each rank running its own routes over all of them) and the shared experts'; gemm mode also the gathered
 * expert-major copy of the rows (src/problem_gemm.c gemm_a). */
double mok_plan_set_bytes(const struct mok_problem_spec *spec, int nranks);

/* dtype fp8_block: the quantized copies of every set's weights and (gemm mode) rows (src/problem_fp8.c) and, with
 * the reference, gemm mode's scratch for one expert's rows (bounded by all rows; layer mode passes rows 0). */
size_t mok_plan_fp8_block_bytes(int experts, int rows, int hidden, int inter, int sets, bool with_reference);
/* The layers' backward problem (src/problem_bwd.c): dy per set, dx, d_router, the weight gradients (fp32 or bf16)
 * and, with the reference, its device part (dx, d_router, one part of the weight gradients' reference, the
 * checker's part buffer) and scratch (per-route dx, one expert's work, other ranks' inputs). */
size_t mok_plan_layer_bwd_bytes(const struct mok_problem_spec *spec, int nranks, int sets, bool with_reference);
/* With the reference, the pinned host memory of the weight gradients' fp32 references (outputs.h: ref_host) */
size_t mok_plan_layer_bwd_host_bytes(const struct mok_problem_spec *spec, int nranks, bool with_reference);
/* How many local experts one part of the weight gradients' reference holds: at most 2 GiB of their fp32 gradients
 * and at most a quarter of the experts, so any problem with several experts is built in parts (what the small
 * suites check: the parts' seams) */
int mok_plan_ref_part_experts(int local_experts, int hidden, int inter);
/* dtype mxfp8: the same for src/problem_mxfp8.c (the weights' scales twice: the quantizer's layout and mok's tile
 * layout). */
size_t mok_plan_mxfp8_bytes(int experts, int rows, int hidden, int inter, int sets, bool with_reference);
/* Layer mode's FP8 forward (src/problem_fp8_layer.c): the output h in route order and, with the reference, its fp32
 * reference and the state each refresh reads (routes, per-route outputs, x and h quantized, one expert's rows and
 * weights; an expert's rows bounded by all routes). */
size_t mok_plan_fp8_layer_bytes(int tokens, int topk, int hidden, int inter, bool with_reference);
/* Device bytes one rank needs for one candidate of impl on a problem (its own buffers, estimated from the
 * uniform-routing receive size with a 25% margin); sets: the problem's input sets (per-set copies an implementation
 * keeps, as cublas-gemm's mxfp8 weights in bf16). */
double mok_plan_impl_bytes(const char *impl, const struct mok_problem_spec *spec, int nranks, int sets,
                           const int *params);

/* Plans above this per rank get a warning at a dry-run without a GPU: an H200's memory (141 GiB, the largest
 * GPU mok-bench has run on). */
#define MOK_PLAN_WARN_BYTES (141.0 * (1ull << 30))

/* Writes the plan to out (when non-NULL) and returns a hash of its text. Candidates the implementations reject
 * without a GPU (desc.h: host_supports) are listed as not supported with the reason and counted apart. gpu_bytes:
 * this GPU's memory (0: no GPU asked), against which the peak is refused or, without one, warned about above
 * MOK_PLAN_WARN_BYTES. *peak_bytes (when non-NULL): the largest estimate of a supported candidate. */
uint64_t mok_plan_print(FILE *out, const struct mok_config *cfg, int nranks, long long l2_bytes, long long gpu_bytes,
                        double *peak_bytes);

#endif
