/* roofline: the least time a problem can take on this machine, from what it must move and compute. Below ~200
 * rows per expert an MoE layer on one H200 is bound by reading each local expert's weights once (DRAM), not by the
 * tensor cores; a report row says which bound holds and how far its time is from it. Pure C, unit tested. */
#ifndef MOK_ROOFLINE_H
#define MOK_ROOFLINE_H

#include <stdint.h>

#include "config.h"

struct mok_roofline {
    double weight_bytes; /* every local expert that gets rows (and the shared experts), read once: 3 H I bf16; with a
                          * backward also read again by dgrad, and the weight gradients' traffic (grad_bytes) */
    double grad_bytes;   /* of weight_bytes, the weight gradients': fp32 read and written (fp32_accumulate) or bf16
                          * written (bf16); 0 for the forward */
    double act_bytes;    /* the rows through the expert MLP: x in, h out and back in, the output out (bf16) */
    double flops;        /* useful: 2 x 3 H I per routed row, and per token for the shared experts */
    double mem_us;       /* (weight_bytes + act_bytes) / the DRAM read bandwidth */
    double gemm_us;      /* flops / the GEMM rate held at the power cap: the routed experts' at the problem's
                          * precision's, the shared experts' (bf16 in every dtype) at bf16's */
    double bound_us;     /* the larger of the two: the row's roofline */
};

/* This rank's roofline. expert_rows[e]: rows routed to global expert e that this rank computes (layer mode: every
 * rank's routes to its experts; gemm mode: its own routes to every expert). dram_gbps, gemm_tflops, bf16_tflops:
 * --probe's figures: the GEMM rate of the problem's precision (bf16, or fp8_block's for both FP8 formats) and the
 * bf16 one (the shared experts' GEMMs, bf16 in every dtype); where one the problem needs is not positive the times
 * are NaN. comm mode has no expert compute: all NaN. */
void mok_roofline_of(const struct mok_problem_spec *spec, int nranks, int rank, const int32_t *expert_rows,
                     double dram_gbps, double gemm_tflops, double bf16_tflops, struct mok_roofline *out);

#endif
