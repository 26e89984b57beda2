/* libmok_bwd_ref: test_libmok_bwd's inputs and host reference (libmok_bwd_ref.h). Per route r = (token t, slot j) to
 * expert e with router weight w (double accumulation, then the GPU's roundings):
 *   gu = bf16(x_t W13_e^T); g, u its gate and up halves; h = bf16(silu(g) u); o = bf16(h W2_e^T); y_t = sum_j w o;
 *   dh' = dy_t W2_e (kept in fp32: the fused kernel's GEMM2-dgrad accumulator feeds its SwiGLU backward directly);
 *   d_router[t][j] = <dh', h>; dg = bf16(w dh' u sig(g) (1 + g (1 - sig(g)))); du = bf16(w dh' silu(g));
 *   dx_t = sum_j bf16([dg, du] W13_e) (each route's row is sent as bf16); dW2_e += dy_t^T bf16(w h);
 *   dW13_e += [dg, du]^T x_t. */
#include "libmok_bwd_ref.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "seeded.h"

static void fill_bf16(uint16_t *v, size_t n, float scale, uint32_t *s)
{
    for (size_t i = 0; i < n; i++)
        v[i] = f32_to_bf16(uniform(s) * scale);
}

void make_weights(uint16_t *w13, uint16_t *w2)
{
    uint32_t s = 12345;
    fill_bf16(w13, (size_t)E * 2 * I * H, 1.0f / sqrtf((float)H), &s);
    fill_bf16(w2, (size_t)E * H * I, 1.0f / sqrtf((float)I), &s);
}

int tokens_of(const struct variant *v, int rank) { return rank == 0 ? v->t0 : v->t1 - 7 * (rank - 1); }

/* Rank p's tokens, routing (distinct ids, positive weights) and dy in variant vi: every rank can make every rank's. */
static void make_inputs(const struct variant *v, int vi, int p, int T, uint16_t *x, int32_t *ids, float *w,
                        uint16_t *dy)
{
    uint32_t s = 777u + 31u * (uint32_t)p + 1009u * (uint32_t)vi;
    fill_bf16(x, (size_t)T * H, 1.0f, &s);
    fill_bf16(dy, (size_t)T * H, 1.0f, &s);
    for (int t = 0; t < T; t++) {
        int a = (int)(lcg(&s) % E), b = (int)(lcg(&s) % (E - 1));
        if (v->hot && (lcg(&s) & 3))
            a = 0;
        ids[t * K] = a;
        ids[t * K + 1] = b >= a ? b + 1 : b; /* distinct */
        float u = uniform(&s), z = 1.0f + expf(u);
        w[t * K] = expf(u) / z;
        w[t * K + 1] = 1.0f / z;
    }
}

/* One route's forward and backward (the math and roundings above). */
struct route_ref {
    float o[H];      /* the expert's output row (bf16 values) */
    float dxr[H];    /* the route's dx row (bf16 values) */
    float dgu[2 * I]; /* dg, du (bf16 values) */
    float hw[I];     /* bf16(w h) */
    float dr;        /* <dh', h> */
};

static void route_reference(const uint16_t *x, const uint16_t *dy, const uint16_t *w13, const uint16_t *w2, float w,
                            struct route_ref *r)
{
    float gu[2 * I], h[I], dhp[I];
    for (int n = 0; n < 2 * I; n++) {
        double a = 0;
        for (int c = 0; c < H; c++)
            a += (double)bf16_to_f32(x[c]) * bf16_to_f32(w13[(size_t)n * H + c]);
        gu[n] = round_bf16((float)a);
    }
    for (int i = 0; i < I; i++) {
        float g = gu[i], u = gu[I + i];
        h[i] = round_bf16(g / (1.0f + expf(-g)) * u);
    }
    for (int c = 0; c < H; c++) {
        double a = 0;
        for (int i = 0; i < I; i++)
            a += (double)h[i] * bf16_to_f32(w2[(size_t)c * I + i]);
        r->o[c] = round_bf16((float)a);
    }
    /* dh' = dy W2 (W2 [H][I]: dh'[i] = sum_c dy[c] W2[c][i]) */
    double acc[I] = {0};
    for (int c = 0; c < H; c++) {
        double d = bf16_to_f32(dy[c]);
        for (int i = 0; i < I; i++)
            acc[i] += d * bf16_to_f32(w2[(size_t)c * I + i]);
    }
    double dot = 0;
    for (int i = 0; i < I; i++) {
        dhp[i] = (float)acc[i];
        dot += (double)dhp[i] * h[i];
    }
    r->dr = (float)dot;
    for (int i = 0; i < I; i++) {
        float g = gu[i], u = gu[I + i], sig = 1.0f / (1.0f + expf(-g)), silu = g * sig, dh = w * dhp[i];
        r->dgu[i] = round_bf16(dh * u * sig * (1.0f + g * (1.0f - sig)));
        r->dgu[I + i] = round_bf16(dh * silu);
        r->hw[i] = round_bf16(w * h[i]);
    }
    /* the route's dx row: [dg, du] W13 (W13 [2I][H]) */
    double dx[H] = {0};
    for (int n = 0; n < 2 * I; n++) {
        double d = r->dgu[n];
        for (int c = 0; c < H; c++)
            dx[c] += d * bf16_to_f32(w13[(size_t)n * H + c]);
    }
    for (int c = 0; c < H; c++)
        r->dxr[c] = round_bf16((float)dx[c]);
}

/* The variant's inputs on this rank and its references: its own tokens' y, dx and d_router; its experts' weight
 * gradients over every rank's routes (every rank's inputs are made here, those of the others only for that). */
int make_problem(const struct bwd_ref_ctx *t, const struct variant *v, int vi, struct problem *P)
{
    memset(P, 0, sizeof *P);
    const int EL = t->EL;
    P->T = tokens_of(v, t->rank);
    P->y = calloc((size_t)T_MAX * H, sizeof(float));
    P->dx = calloc((size_t)T_MAX * H, sizeof(float));
    P->dr = calloc((size_t)T_MAX * K, sizeof(float));
    P->dw13 = calloc((size_t)EL * 2 * I * H, sizeof(double));
    P->dw2 = calloc((size_t)EL * H * I, sizeof(double));
    struct route_ref *r = malloc(sizeof *r);
    if (!P->y || !P->dx || !P->dr || !P->dw13 || !P->dw2 || !r)
        return 1;
    for (int p = 0; p < t->nranks; p++) {
        int T = tokens_of(v, p);
        uint16_t *x = malloc(sizeof(uint16_t) * T_MAX * H), *dy = malloc(sizeof(uint16_t) * T_MAX * H);
        int32_t *ids = malloc(sizeof(int32_t) * T_MAX * K);
        float *w = malloc(sizeof(float) * T_MAX * K);
        if (!x || !dy || !ids || !w)
            return 1;
        make_inputs(v, vi, p, T, x, ids, w, dy);
        for (int tok = 0; tok < T; tok++) {
            const uint16_t *xt = x + (size_t)tok * H, *dyt = dy + (size_t)tok * H;
            for (int j = 0; j < K; j++) {
                int e = ids[tok * K + j], own = p == t->rank, local = e / EL == t->rank;
                if (!own && !local)
                    continue;
                float wr = w[tok * K + j];
                route_reference(xt, dyt, t->w13 + (size_t)e * 2 * I * H, t->w2 + (size_t)e * H * I, wr, r);
                if (own) {
                    for (int c = 0; c < H; c++) {
                        P->y[(size_t)tok * H + c] += wr * r->o[c]; /* in slot order, as the owner's sum */
                        P->dx[(size_t)tok * H + c] += r->dxr[c];
                    }
                    P->dr[tok * K + j] = r->dr;
                }
                if (local) {
                    int el = e - t->rank * EL;
                    double *d13 = P->dw13 + (size_t)el * 2 * I * H, *d2 = P->dw2 + (size_t)el * H * I;
                    P->rows[el]++;
                    for (int c = 0; c < H; c++) {
                        double d = bf16_to_f32(dyt[c]);
                        for (int i = 0; i < I; i++)
                            d2[(size_t)c * I + i] += d * r->hw[i];
                    }
                    for (int n = 0; n < 2 * I; n++) {
                        double d = r->dgu[n];
                        for (int c = 0; c < H; c++)
                            d13[(size_t)n * H + c] += d * bf16_to_f32(xt[c]);
                    }
                }
            }
        }
        if (p == t->rank) {
            P->x = x, P->dy = dy, P->ids = ids, P->w = w;
        } else {
            free(x), free(dy), free(ids), free(w);
        }
    }
    free(r);
    return 0;
}

void free_problem(struct problem *P)
{
    free(P->x), free(P->dy), free(P->ids), free(P->w), free(P->y), free(P->dx), free(P->dr), free(P->dw13),
        free(P->dw2);
}

