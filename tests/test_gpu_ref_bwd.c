/* test_gpu_ref_bwd: the GPU's fp32 backward reference (kernels/reference/backward.cu) against the host's double
 * precision one (src/ref_moe.c, itself checked against central differences): dx, dW13, dW2 and d_router of a
 * small routed problem (ragged experts, one expert without routes, a token routed twice to one expert), without
 * the forward's bf16 roundings to within 1e-4 of each output's max |ref|, with them to within 2e-2. Exit 0 pass,
 * 1 fail, 77 without a GPU. */
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mok_kernels.h"
#include "ref_moe.h"

#include "check.h"

enum { T = 37, H = 128, I = 64, E = 5, K = 2 };

static uint16_t to_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return (uint16_t)((u + 0x7FFFu + ((u >> 16) & 1)) >> 16);
}
static double from_bf16(uint16_t b)
{
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static float rnd(void) { return (float)rand() / RAND_MAX * 2 - 1; }

/* max |a - ref| / max |ref| */
static double rel_err(const float *a, const double *ref, size_t n)
{
    double amax = 0, dmax = 0;
    for (size_t i = 0; i < n; i++) {
        amax = fmax(amax, fabs(ref[i]));
        dmax = fmax(dmax, fabs(a[i] - ref[i]));
    }
    return amax > 0 ? dmax / amax : dmax;
}

static void *dev(const void *host, size_t bytes)
{
    void *d = NULL;
    if (cudaMalloc(&d, bytes) != cudaSuccess)
        return NULL;
    if (host)
        cudaMemcpy(d, host, bytes, cudaMemcpyHostToDevice);
    else
        cudaMemset(d, 0, bytes);
    return d;
}

int main(void)
{
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev < 1) {
        printf("SKIP: no GPU\n");
        return 77;
    }
    static uint16_t x[T * H], dy[T * H], w13[E * 2 * I * H], w2[E * H * I];
    static double xd[T * H], dyd[T * H], w13d[E * 2 * I * H], w2d[E * H * I], rwd[T * K];
    static float rw[T * K];
    static int32_t ids[T * K];
    srand(5);
    for (int i = 0; i < T * H; i++)
        x[i] = to_bf16(rnd()), dy[i] = to_bf16(rnd()), xd[i] = from_bf16(x[i]), dyd[i] = from_bf16(dy[i]);
    for (int i = 0; i < E * 2 * I * H; i++)
        w13[i] = to_bf16(rnd() * 0.1f), w13d[i] = from_bf16(w13[i]);
    for (int i = 0; i < E * H * I; i++)
        w2[i] = to_bf16(rnd() * 0.1f), w2d[i] = from_bf16(w2[i]);
    for (int t = 0; t < T; t++)
        for (int j = 0; j < K; j++) {
            ids[t * K + j] = (t * 7 + j * 3) % (E - 1); /* expert E - 1 gets no routes */
            rw[t * K + j] = 0.3f + 0.4f * rnd() * rnd(), rwd[t * K + j] = rw[t * K + j];
        }
    ids[5 * K + 1] = ids[5 * K];
    /* host reference */
    static double dx_h[T * H], dw13_h[E * 2 * I * H], dw2_h[E * H * I], dr_h[T * K];
    struct mok_ref_moe m = {T, H, I, E, K, 0, xd, w13d, w2d, NULL, NULL, ids, rwd};
    CHECK(mok_ref_moe_backward(&m, dyd, dx_h, dw13_h, dw2_h, dr_h, NULL, NULL) == 0, "host backward");
    /* routes sorted by expert */
    int first[E + 1] = {0}, cursor[E];
    static int32_t tok[T * K], route[T * K];
    for (int r = 0; r < T * K; r++)
        first[ids[r] + 1]++;
    for (int e = 0; e < E; e++)
        first[e + 1] += first[e];
    memcpy(cursor, first, sizeof cursor);
    for (int r = 0; r < T * K; r++) {
        int s = cursor[ids[r]]++;
        tok[s] = r / K, route[s] = r;
    }
    uint16_t *d_x = dev(x, sizeof x), *d_dy = dev(dy, sizeof dy), *d_w13 = dev(w13, sizeof w13), *d_w2 = dev(w2, sizeof w2);
    int32_t *d_tok = dev(tok, sizeof tok), *d_route = dev(route, sizeof route);
    float *d_rw = dev(rw, sizeof rw), *d_scratch = dev(NULL, sizeof(float) * T * K * 6 * I);
    float *d_dxr = dev(NULL, sizeof(float) * T * K * H), *d_dx = dev(NULL, sizeof(float) * T * H);
    float *d_dw13 = dev(NULL, sizeof(float) * E * 2 * I * H), *d_dw2 = dev(NULL, sizeof(float) * E * H * I);
    float *d_dr = dev(NULL, sizeof(float) * T * K);
    if (!d_x || !d_dy || !d_w13 || !d_w2 || !d_tok || !d_route || !d_rw || !d_scratch || !d_dxr || !d_dx || !d_dw13 ||
        !d_dw2 || !d_dr) {
        printf("FAIL: allocation\n");
        return 1;
    }
    static float dx[T * H], dw13[E * 2 * I * H], dw2[E * H * I], dr[T * K];
    for (int round = 0; round <= 1; round++) {
        cudaMemset(d_dw13, 0, sizeof dw13);
        cudaMemset(d_dw2, 0, sizeof dw2);
        for (int e = 0; e < E; e++) {
            int n = first[e + 1] - first[e];
            CHECK(mok_ref_bwd_expert_f32(d_x, d_dy, d_rw, d_tok + first[e], d_route + first[e], n, H, I,
                                         d_w13 + (size_t)e * 2 * I * H, d_w2 + (size_t)e * H * I, round, d_scratch,
                                         d_dxr, d_dw13 + (size_t)e * 2 * I * H, d_dw2 + (size_t)e * H * I, d_dr,
                                         NULL) == 0,
                  "expert %d launch", e);
        }
        CHECK(mok_ref_sum_dx(d_dxr, T, K, H, NULL, d_dx, NULL) == 0, "sum dx");
        CHECK(cudaDeviceSynchronize() == cudaSuccess, "run");
        cudaMemcpy(dx, d_dx, sizeof dx, cudaMemcpyDeviceToHost);
        cudaMemcpy(dw13, d_dw13, sizeof dw13, cudaMemcpyDeviceToHost);
        cudaMemcpy(dw2, d_dw2, sizeof dw2, cudaMemcpyDeviceToHost);
        cudaMemcpy(dr, d_dr, sizeof dr, cudaMemcpyDeviceToHost);
        double tol = round ? 2e-2 : 1e-4, e1 = rel_err(dx, dx_h, T * H), e2 = rel_err(dw13, dw13_h, E * 2 * I * H),
               e3 = rel_err(dw2, dw2_h, E * H * I), e4 = rel_err(dr, dr_h, T * K);
        printf("round %d: dx %.2e, dw13 %.2e, dw2 %.2e, d_router %.2e (of max |ref|)\n", round, e1, e2, e3, e4);
        CHECK(e1 <= tol && e2 <= tol && e3 <= tol && e4 <= tol, "round %d: an output off by more than %g", round, tol);
        int untouched = 1; /* the expert without routes keeps zero gradients */
        for (int i = 0; i < H * I; i++)
            untouched &= dw2[(size_t)(E - 1) * H * I + i] == 0.0f;
        CHECK(untouched, "the expert without routes got a dW2");
    }
    printf("test_gpu_ref_bwd: %s\n", failures ? "FAILED" : "all passed");
    return failures ? 1 : 0;
}
