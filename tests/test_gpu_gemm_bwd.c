/* test_gpu_gemm_bwd: the GEMM core's backward policies (kernels/mok_gemm.h) against a double-precision host
 * reference, on ragged groups whose sizes sit at the 64-row k blocks' edges (0, 1, 63, 64, 65, 129, 200 rows):
 *   dgrad  C[r][n] = sum_k A[r][k] W[g][k][n] (mok_gemm_sm90 with b_transposed): every row of every group, bf16,
 *          poisoned first; the rows past the groups' end stay untouched;
 *   wgrad  C[g][m][n] (+)= sum over group g's rows r of A[r][m] B[r][n] (mok_wgrad_sm90): fp32 added to a seeded
 *          start (an empty group's start bitwise unchanged), or bf16 written (poisoned first; an empty group's
 *          gradient zero); both bitwise the same when run twice.
 * Each over the tile, stage, CTA-count and order configurations the kernels take. */
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bf16.h"
#include "mok_gemm.h"
#include "mok_kernels.h"

enum { GROUPS = 7, K = 384, M = 256, N = 256, SLACK = 64 };
static const int kRows[GROUPS] = {0, 1, 63, 64, 65, 129, 200};
static int failures;

static uint32_t lcg(uint32_t *s)
{
    *s = *s * 1664525u + 1013904223u;
    return *s >> 8;
}

/* n bf16 values uniform in [-scale, scale), host copy in h and device copy returned */
static uint16_t *random_bf16(size_t n, float scale, uint32_t seed, uint16_t **h)
{
    *h = malloc(n * 2 + 2);
    for (size_t i = 0; i < n; i++)
        (*h)[i] = f32_to_bf16(scale * ((float)(lcg(&seed) & 0xFFFF) / 32768.0f - 1.0f));
    uint16_t *d = NULL;
    cudaMalloc((void **)&d, n * 2 + 2);
    cudaMemcpy(d, *h, n * 2, cudaMemcpyHostToDevice);
    return d;
}

static void verdict(int ok, const char *what, const char *cfg, double err, long long bad)
{
    printf("%s %-34s %-40s max err %.2e of max|ref|, %lld bad\n", ok ? "ok  " : "FAIL", what, cfg, err, bad);
    failures += !ok;
}

static void test_dgrad(const int32_t *d_off, const int *off, int rows)
{
    uint16_t *ha, *hw;
    uint16_t *a = random_bf16((size_t)rows * K, 1.0f, 11u, &ha);
    uint16_t *w = random_bf16((size_t)GROUPS * K * N, 3.0f / sqrtf((float)K), 12u, &hw);
    double *ref = calloc((size_t)rows * N, sizeof(double)), amax = 0;
    for (int g = 0; g < GROUPS; g++)
        for (int r = off[g]; r < off[g + 1]; r++)
            for (int k = 0; k < K; k++) {
                const double av = bf16_to_f32(ha[(size_t)r * K + k]);
                const uint16_t *wr = hw + ((size_t)g * K + k) * N;
                for (int n = 0; n < N; n++)
                    ref[(size_t)r * N + n] += av * bf16_to_f32(wr[n]);
            }
    for (size_t i = 0; i < (size_t)rows * N; i++)
        amax = fmax(amax, fabs(ref[i]));
    uint16_t *c, *hc = malloc((size_t)(rows + SLACK) * N * 2);
    cudaMalloc((void **)&c, (size_t)(rows + SLACK) * N * 2);
    struct mok_gemm_args g = {.a = a, .b = w, .c = c, .offset = d_off, .groups = GROUPS, .rows_capacity = rows,
                              .n_out = N, .k = K, .b_transposed = 1};
    for (int tn = 128; tn <= 256; tn += 128)
        for (int stages = 0; stages <= 4; stages += 2) /* 4 at tile_n 256: the output stored in two rounds */
            for (int ctas = 0; ctas <= 3; ctas += 3)
                for (int raster = 0; raster <= 1; raster++) {
                    struct mok_gemm_sm90_config cfg = {.tile_m = 128, .tile_n = tn, .stages = stages, .sms = ctas,
                                                       .cluster_m = 1, .raster = raster};
                    char label[64], why[256] = "";
                    snprintf(label, sizeof label, "tile_n %d stages %d ctas %d raster %d", tn, stages, ctas, raster);
                    mok_poison_bf16(c, (size_t)(rows + SLACK) * N, NULL);
                    int rc = mok_gemm_sm90_supports(&g, &cfg, why, sizeof why) ? mok_gemm_sm90(&g, &cfg, NULL) : -1;
                    cudaError_t e = cudaDeviceSynchronize();
                    if (rc || e != cudaSuccess) {
                        printf("FAIL dgrad %s: launch %d / %s / %s\n", label, rc, cudaGetErrorString(e), why);
                        failures++;
                        if (e != cudaSuccess)
                            exit(1);
                        continue;
                    }
                    cudaMemcpy(hc, c, (size_t)(rows + SLACK) * N * 2, cudaMemcpyDeviceToHost);
                    double dmax = 0;
                    long long bad = 0;
                    for (size_t i = 0; i < (size_t)rows * N; i++) {
                        const float v = bf16_to_f32(hc[i]);
                        if (!isfinite(v))
                            bad++;
                        else
                            dmax = fmax(dmax, fabs(v - ref[i]));
                    }
                    for (size_t i = (size_t)rows * N; i < (size_t)(rows + SLACK) * N; i++) /* past the groups */
                        bad += isfinite(bf16_to_f32(hc[i])) ? 1 : 0;
                    verdict(dmax / amax <= 1e-2 && bad == 0, "dgrad (weights read transposed)", label, dmax / amax,
                            bad);
                }
    cudaFree(a), cudaFree(w), cudaFree(c);
    free(ha), free(hw), free(hc), free(ref);
}

static void test_wgrad(const int32_t *d_off, const int *off, int rows)
{
    uint16_t *ha, *hb, *hs;
    uint16_t *a = random_bf16((size_t)rows * M, 1.0f, 21u, &ha);
    uint16_t *b = random_bf16((size_t)rows * N, 1.0f, 22u, &hb);
    const size_t nc = (size_t)GROUPS * M * N;
    uint16_t *start_bf16 = random_bf16(nc, 0.5f, 23u, &hs); /* the fp32 start, from bf16 values */
    float *start = malloc(nc * 4), *c32, *h32 = malloc(nc * 4), *h32b = malloc(nc * 4);
    for (size_t i = 0; i < nc; i++)
        start[i] = bf16_to_f32(hs[i]);
    double *sum = calloc(nc, sizeof(double)), amax = 0;
    for (int g = 0; g < GROUPS; g++)
        for (int r = off[g]; r < off[g + 1]; r++)
            for (int m = 0; m < M; m++) {
                const double av = bf16_to_f32(ha[(size_t)r * M + m]);
                double *out = sum + ((size_t)g * M + m) * N;
                for (int n = 0; n < N; n++)
                    out[n] += av * bf16_to_f32(hb[(size_t)r * N + n]);
            }
    for (size_t i = 0; i < nc; i++)
        amax = fmax(amax, fabs(sum[i]));
    uint16_t *c16, *h16 = malloc(nc * 2), *h16b = malloc(nc * 2);
    cudaMalloc((void **)&c32, nc * 4);
    cudaMalloc((void **)&c16, nc * 2);
    for (int tn = 128; tn <= 256; tn += 128)
        for (int stages = 0; stages <= 4; stages += 2) /* 4: bf16 at tile_n 256 staged in two rounds */
            for (int ctas = 0; ctas <= 3; ctas += 3)
                for (int f32 = 1; f32 >= 0; f32--) { /* fp32 gradients, then bf16 */
                    struct mok_gemm_sm90_config cfg = {.tile_m = 128, .tile_n = tn, .stages = stages, .sms = ctas,
                                                       .cluster_m = 1};
                    struct mok_wgrad_args w = {.a = a, .b = b, .c_f32 = f32 ? c32 : NULL, .c_bf16 = f32 ? NULL : c16,
                                               .offset = d_off, .groups = GROUPS, .rows_capacity = rows, .m = M,
                                               .n = N};
                    char label[64], why[256] = "";
                    snprintf(label, sizeof label, "%s tile_n %d stages %d ctas %d", f32 ? "fp32" : "bf16", tn, stages,
                             ctas);
                    double dmax = 0;
                    long long bad = 0;
                    int ok = 1;
                    for (int rep = 0; rep < 2 && ok; rep++) { /* twice: bitwise the same */
                        if (f32)
                            cudaMemcpy(c32, start, nc * 4, cudaMemcpyHostToDevice);
                        else
                            mok_poison_bf16(c16, nc, NULL);
                        int rc = mok_wgrad_sm90_supports(&w, &cfg, why, sizeof why) ? mok_wgrad_sm90(&w, &cfg, NULL)
                                                                                     : -1;
                        cudaError_t e = cudaDeviceSynchronize();
                        if (rc || e != cudaSuccess) {
                            printf("FAIL wgrad %s: launch %d / %s / %s\n", label, rc, cudaGetErrorString(e), why);
                            failures++, ok = 0;
                            if (e != cudaSuccess)
                                exit(1);
                            break;
                        }
                        if (f32)
                            cudaMemcpy(rep ? h32b : h32, c32, nc * 4, cudaMemcpyDeviceToHost);
                        else
                            cudaMemcpy(rep ? h16b : h16, c16, nc * 2, cudaMemcpyDeviceToHost);
                    }
                    if (!ok)
                        continue;
                    for (int g = 0; g < GROUPS; g++)
                        for (size_t i = (size_t)g * M * N; i < (size_t)(g + 1) * M * N; i++) {
                            const double v = f32 ? h32[i] : bf16_to_f32(h16[i]);
                            const double want = (f32 ? start[i] : 0.0) + sum[i];
                            if (!isfinite(v) || (f32 && off[g + 1] == off[g] && h32[i] != start[i]))
                                bad++; /* NaN left by the poison, or an empty group's start changed */
                            else
                                dmax = fmax(dmax, fabs(v - want));
                        }
                    const int repeat = f32 ? !memcmp(h32, h32b, nc * 4) : !memcmp(h16, h16b, nc * 2);
                    verdict(dmax / amax <= (f32 ? 1e-4 : 1e-2) && bad == 0 && repeat,
                            repeat ? "wgrad (K = rows)" : "wgrad (K = rows): repeat differs", label, dmax / amax,
                            bad);
                }
    cudaFree(a), cudaFree(b), cudaFree(start_bf16), cudaFree(c32), cudaFree(c16);
    free(ha), free(hb), free(hs), free(start), free(h32), free(h32b), free(h16), free(h16b), free(sum);
}

int main(void)
{
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
        printf("SKIP: no GPU\n");
        return 77;
    }
    struct cudaDeviceProp prop;
    cudaGetDeviceProperties(&prop, 0);
    printf("test_gpu_gemm_bwd on %s (sm_%d%d)\n", prop.name, prop.major, prop.minor);
    if (prop.major != 9) {
        printf("SKIP: the backward's GEMM-core policies run on sm_90 only\n");
        return 77;
    }
    int off[GROUPS + 1] = {0};
    for (int g = 0; g < GROUPS; g++)
        off[g + 1] = off[g] + kRows[g];
    const int rows = off[GROUPS];
    int32_t *d_off;
    cudaMalloc((void **)&d_off, sizeof off);
    cudaMemcpy(d_off, off, sizeof off, cudaMemcpyHostToDevice);
    test_dgrad(d_off, off, rows);
    test_wgrad(d_off, off, rows);
    cudaFree(d_off);
    printf("test_gpu_gemm_bwd: %s (%d failures)\n", failures ? "FAILED" : "all passed", failures);
    return failures ? 1 : 0;
}
