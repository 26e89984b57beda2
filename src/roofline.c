/* roofline: bytes and FLOPs a problem must move and compute, against --probe's ceilings (see roofline.h). */
#include "roofline.h"

#include <math.h>
#include <stdbool.h>

void mok_roofline_of(const struct mok_problem_spec *spec, int nranks, int rank, const int32_t *expert_rows,
                     double dram_gbps, double gemm_tflops, double bf16_tflops, struct mok_roofline *out)
{
    *out = (struct mok_roofline){NAN, NAN, NAN, NAN, NAN, NAN, NAN};
    if (spec->mode == MOK_MODE_COMM)
        return;
    out->grad_bytes = 0; /* the forward writes no gradient */
    const struct mok_model *m = &spec->model;
    /* fp8_block: e4m3 weights (plus one fp32 scale per 128 x 128 block), rows read and h passed as e4m3 (plus one
     * scale per 128), GEMM2's output bf16; gemm_tflops is then the caller's FP8 rate (--probe: cuBLASLt's) */
    /* mxfp8: e4m3 everywhere fp8_block has it, with one e8m0 byte per 32 values (weights and rows alike) */
    const bool mx = spec->dtype == MOK_DTYPE_MXFP8, fp8 = spec->dtype == MOK_DTYPE_FP8_BLOCK || mx;
    const double h = m->hidden, i = m->intermediate;
    const double w_scale = mx ? 1.0 / 32 : 4.0 / (128 * 128), a_scale = mx ? 1.0 / 32 : 4.0 / 128;
    const double expert_bytes = fp8 ? 3.0 * h * i * (1 + w_scale) : 3.0 * h * i * 2;
    int e0 = 0, e1 = m->experts; /* gemm mode: every expert */
    if (spec->mode == MOK_MODE_LAYER) {
        int local = m->experts / (nranks > 0 ? nranks : 1);
        e0 = rank * local, e1 = e0 + local;
    }
    double rows = 0, routed = 0; /* an expert nobody routes to is never read */
    for (int e = e0; e < e1; e++) {
        rows += expert_rows[e];
        routed += expert_rows[e] > 0;
    }
    const bool fwd = mok_pass_has_fwd(spec->pass), bwd = mok_pass_has_bwd(spec->pass);
    /* an MLP of intermediate n's backward, per row: dy (h) read by both GEMM2 GEMMs, x (h) by dW13's, dx (h)
     * written, gu (2n) read, dh' (n) written and read, [dg, du] (2n) written and read by both GEMM1 GEMMs, w h (n)
     * written and read; its weight gradients' traffic: fp32 read and written, or bf16 written */
    const double bwd_row_i = 2 + 2 + 3 * 2 + 2, grad_per_weight = spec->wgrad == MOK_WGRAD_BF16 ? 2 : 4 * 2;
    double weights = 0, per_row = 0, flops_per_row = 0;
    if (fwd) { /* per row: x (h) in, gate and up (2i) in registers, h (i) stored and read back, out (h) stored */
        weights += routed * expert_bytes;
        per_row += fp8 ? (h + i + i) * (1 + a_scale) + h * 2 : (h + i + i + h) * 2;
        flops_per_row += 2.0 * 3.0 * h * i;
    }
    if (bwd) {
        /* dgrad reads the weights once more (bf16), wgrad moves the gradients; the rows' terms above; twice the
         * forward's FLOPs (two dgrad and two wgrad GEMMs of the forward's sizes) */
        const double grad_bytes = 3.0 * h * i * grad_per_weight;
        weights += routed * (expert_bytes + grad_bytes);
        out->grad_bytes = routed * grad_bytes;
        per_row += (4 * h + bwd_row_i * i) * 2;
        flops_per_row += 2.0 * 2.0 * 3.0 * h * i;
    }
    double act = rows * per_row, flops = rows * flops_per_row, shared_flops = 0;
    if (m->shared_experts && spec->mode == MOK_MODE_LAYER) { /* one MLP of shared x i over this rank's tokens, bf16
                                                               * in every dtype, with the routed rows' per-pass
                                                               * terms: its weights read once per pass (forward,
                                                               * dgrad), its gradient's traffic, its rows */
        const double si = m->shared_experts * i, t = spec->tokens_per_rank, shared_w = 3.0 * h * si * 2;
        if (fwd) {
            weights += shared_w;
            act += t * (h + 2 * si + h) * 2;
            shared_flops += t * 2.0 * 3.0 * h * si;
        }
        if (bwd) {
            const double grad = 3.0 * h * si * grad_per_weight;
            weights += shared_w + grad;
            out->grad_bytes += grad;
            act += t * (4 * h + bwd_row_i * si) * 2;
            shared_flops += t * 2.0 * 2.0 * 3.0 * h * si;
        }
    }
    out->weight_bytes = weights;
    out->act_bytes = act;
    out->flops = flops + shared_flops;
    if (dram_gbps > 0)
        out->mem_us = (weights + act) / (dram_gbps * 1e9) * 1e6;
    /* the routed experts' FLOPs at the problem's precision's rate, the shared experts' (bf16 in every dtype) at
     * bf16's */
    const bool rates = gemm_tflops > 0 && (shared_flops == 0 || bf16_tflops > 0);
    if (rates)
        out->gemm_us = (flops / gemm_tflops + (shared_flops > 0 ? shared_flops / bf16_tflops : 0)) / 1e12 * 1e6;
    if (dram_gbps > 0 && rates)
        out->bound_us = out->mem_us > out->gemm_us ? out->mem_us : out->gemm_us;
}
