/* test_gpu_ref_fp8: the GPU's fp8_block reference GEMM (kernels/reference/reference_fp8.cu) against a host double
 * precision GEMM of the operands quantized and dequantized by the host reference (src/fp8.c), to within 1e-5 of
 * max |ref|, for m = 1, 37, 200 (whole and partial 64-row tiles), n = 256, k = 384, a magnitude per scale block from
 * 2^-4 to 2^4. Two wrong readings of the scales (the weights' [n / 128][k / 128] read as [k / 128][n / 128], every
 * row taking row 0's scales) must miss by far more, so the data would catch a layout mistake. Exit 0 pass, 1 fail,
 * 77 without a GPU. */
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fp8.h"
#include "mok_kernels.h"

#include "check.h"

enum { N = 256, K = 384, KB = K / 128, NB = N / 128, M_MAX = 200 };

static float rnd(void) { return (float)rand() / RAND_MAX * 2 - 1; }

/* which scales the host GEMM reads: the format's, or one of the wrong readings it must tell apart */
enum scale_reading { RIGHT, W_TRANSPOSED, A_ROW0 };

/* c[i][j] = sum_kk deq(a)(i, kk) deq(w)(j, kk) in double; each dequantized value an fp32 product, as the format
 * defines it */
static void host_gemm(const uint8_t *qa, const float *sa, int m, const uint8_t *qw, const float *sw,
                      enum scale_reading how, double *c)
{
    for (int i = 0; i < m; i++)
        for (int j = 0; j < N; j++) {
            double acc = 0;
            for (int kk = 0; kk < K; kk++) {
                int ar = how == A_ROW0 ? 0 : i;
                size_t ws = how == W_TRANSPOSED ? (size_t)(kk / 128) * NB + j / 128 : (size_t)(j / 128) * KB + kk / 128;
                float av = mok_e4m3_to_f32(qa[(size_t)i * K + kk]) * sa[(size_t)ar * KB + kk / 128];
                float wv = mok_e4m3_to_f32(qw[(size_t)j * K + kk]) * sw[ws];
                acc += (double)av * wv;
            }
            c[(size_t)i * N + j] = acc;
        }
}

/* max |c - ref| / max |ref|; a non-finite c (unwritten: the output is poisoned with NaN) counts as infinite */
static double rel_err(const float *c, const double *ref, size_t n)
{
    double amax = 0, dmax = 0;
    for (size_t i = 0; i < n; i++) {
        amax = fmax(amax, fabs(ref[i]));
        dmax = isfinite(c[i]) ? fmax(dmax, fabs(c[i] - ref[i])) : INFINITY;
    }
    return amax > 0 ? dmax / amax : dmax;
}

int main(void)
{
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev < 1) {
        printf("SKIP: no GPU\n");
        return 77;
    }
    static float x[M_MAX * K], w[N * K], sa[M_MAX * KB], sw[NB * KB], c[M_MAX * N];
    static uint8_t qa[M_MAX * K], qw[N * K];
    static double ref[M_MAX * N], wrong[M_MAX * N];
    srand(11);
    for (int i = 0; i < M_MAX * K; i++)
        x[i] = ldexpf(rnd(), (i / K * 5 + i % K / 128 * 3) % 9 - 4);
    for (int i = 0; i < N * K; i++)
        w[i] = ldexpf(rnd(), (i / K / 128 * 7 + i % K / 128 * 2) % 9 - 4);
    CHECK(mok_quant_fp8_block_rows(x, M_MAX, K, qa, sa) == 0, "host quantization of the activations");
    CHECK(mok_quant_fp8_block_weights(w, N, K, qw, sw) == 0, "host quantization of the weights");

    uint8_t *dqa = NULL, *dqw = NULL;
    float *dsa = NULL, *dsw = NULL, *dc = NULL;
    if (cudaMalloc((void **)&dqa, sizeof qa) || cudaMalloc((void **)&dqw, sizeof qw) ||
        cudaMalloc((void **)&dsa, sizeof sa) || cudaMalloc((void **)&dsw, sizeof sw) ||
        cudaMalloc((void **)&dc, sizeof c)) {
        printf("FAIL: allocation\n");
        return 1;
    }
    cudaMemcpy(dqa, qa, sizeof qa, cudaMemcpyHostToDevice);
    cudaMemcpy(dqw, qw, sizeof qw, cudaMemcpyHostToDevice);
    cudaMemcpy(dsa, sa, sizeof sa, cudaMemcpyHostToDevice);
    cudaMemcpy(dsw, sw, sizeof sw, cudaMemcpyHostToDevice);

    const int ms[] = {1, 37, 200};
    for (int t = 0; t < 3; t++) {
        int m = ms[t];
        size_t n = (size_t)m * N;
        cudaMemset(dc, 0xFF, sizeof c); /* NaN: an unwritten element fails */
        CHECK(mok_ref_gemm_fp8_block(dqa, dsa, m, K, dqw, dsw, N, dc, NULL) == 0, "m %d: launch", m);
        CHECK(cudaDeviceSynchronize() == cudaSuccess, "m %d: kernel", m);
        cudaMemcpy(c, dc, n * sizeof *c, cudaMemcpyDeviceToHost);
        host_gemm(qa, sa, m, qw, sw, RIGHT, ref);
        double err = rel_err(c, ref, n);
        CHECK(err <= 1e-5, "m %d: max |c - ref| / max |ref| = %.3g > 1e-5", m, err);
        host_gemm(qa, sa, m, qw, sw, W_TRANSPOSED, wrong);
        double miss = rel_err(c, wrong, n);
        CHECK(miss > 1e-2, "m %d: the weight scales read transposed come as close (%.3g): the data cannot tell", m,
              miss);
        if (m > 1) {
            host_gemm(qa, sa, m, qw, sw, A_ROW0, wrong);
            miss = rel_err(c, wrong, n);
            CHECK(miss > 1e-2, "m %d: row 0's scales for every row come as close (%.3g): the data cannot tell", m,
                  miss);
        }
        printf("m %3d: max |c - ref| / max |ref| = %.3g\n", m, err);
    }
    CHECK(mok_ref_gemm_fp8_block(dqa, dsa, 1, 200, dqw, dsw, N, dc, NULL) == (int)cudaErrorInvalidValue,
          "k not a multiple of 128 accepted");
    CHECK(mok_ref_gemm_fp8_block(dqa, dsa, 1, K, dqw, dsw, 200, dc, NULL) == (int)cudaErrorInvalidValue,
          "n not a multiple of 128 accepted");
    cudaFree(dqa), cudaFree(dqw), cudaFree(dsa), cudaFree(dsw), cudaFree(dc);
    printf("test_gpu_ref_fp8: %s\n", failures ? "FAILED" : "all passed");
    return failures ? 1 : 0;
}
