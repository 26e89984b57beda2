/* ref_moe: the MoE layer's forward and backward on the host, in double precision, for small problems: the ground
 * truth the GPU references and the implementations' backward are tested against (issue 21). The math is
 * DESIGN.md's: per route r = (token t, slot j) to expert e with router weight w,
 *   forward   gu = x_t W13_e^T (gate g, up u), h = silu(g) u, o = h W2_e^T, y_t = sum_j w o (+ the shared MLP's)
 *   backward  dh' = dy_t W2_e, d_router[t][j] = <dh', h> (= <dy_t, o>), dh = w dh',
 *             dg = dh u silu'(g), du = dh silu(g), dx_t = sum_j [dg, du] W13_e,
 *             dW2_e += (w dy_t)^T h, dW13_e += [dg, du]^T x_t;
 * shared experts are one MLP of shared_inter columns with weight 1 on every token (their own dx and weight
 * gradients, no router weight). Layouts as the GPU's: x, y, dy, dx [T][H]; ids, w, d_router [T][k]; w13 [E][2I][H]
 * (gate rows, then up rows); w2 [E][H][I]; the shared MLP's sw13 [2S][H], sw2 [H][S]. */
#ifndef MOK_REF_MOE_H
#define MOK_REF_MOE_H

#include <stdint.h>

struct mok_ref_moe {
    int tokens, hidden, inter, experts, topk, shared_inter; /* shared_inter 0: no shared experts */
    const double *x, *w13, *w2, *sw13, *sw2;                  /* the layer's inputs and weights */
    const int32_t *ids;
    const double *w;
};

/* y [T][H]. Returns 0, or -1 on a bad shape or expert id. */
int mok_ref_moe_forward(const struct mok_ref_moe *m, double *y);

/* Given dy [T][H]: dx [T][H], dw13 [E][2I][H], dw2 [E][H][I] (accumulated: += into what they hold, as
 * wgrad fp32_accumulate does; zero them for plain gradients), d_router [T][k], and for shared experts dsw13
 * [2S][H], dsw2 [H][S] (accumulated likewise; NULL when shared_inter is 0). Returns 0 or -1. */
int mok_ref_moe_backward(const struct mok_ref_moe *m, const double *dy, double *dx, double *dw13, double *dw2,
                         double *d_router, double *dsw13, double *dsw2);

#endif
