/* test_gpu_quant: the GPU's FP8 quantizers (kernels/util/quant.cu, and the megakernel's lane-group ones in
 * kernels/util/fp8_quant.cuh) against the host reference (src/fp8.c), byte for byte: rows of bf16 at scales from 1e-6
 * to 1e4, a row of zeros, values on e4m3 ties and subnormals, every bf16 as a block's amax (test_every_amax); a NaN
 * input flags the status. The fp8_block weight quantizer the same way on stacked matrices (test_weights). Exit 0
 * pass, 1 fail, 77 without a GPU. */
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fp8.h"
#include "mok_kernels.h"
#include "testing/mok_test_kernels.h"

#include "bf16.h"
#include "check.h"

static uint32_t rng_state = 12345u;
static float rnd_pm1(void) /* uniform in [-1, 1): xorshift, fast enough for the 15 M values of the large case */
{
    rng_state ^= rng_state << 13, rng_state ^= rng_state >> 17, rng_state ^= rng_state << 5;
    return (float)(rng_state >> 8) / 8388608.0f - 1.0f;
}

/* mok_quant_fp8_block_weights_bf16 on mats stacked [rows][k] matrices against the host's
 * mok_quant_fp8_block_weights per matrix, byte for byte, the outputs poisoned before the launch (an unwritten byte
 * differs). Returns the number of differing values + scales, or -1 when the run could not be made. */
static long long weights_vs_host(const uint16_t *x, long long mats, int rows, int k, int32_t *status_out)
{
    size_t per = (size_t)rows * k, n = (size_t)mats * per, ns = n / (128 * 128);
    float *xf = malloc(per * sizeof *xf), *s_host = malloc(ns * 4), *s_dev = malloc(ns * 4);
    uint8_t *q_host = malloc(n), *q_dev = malloc(n);
    uint16_t *dx = NULL;
    uint8_t *dq = NULL;
    float *ds = NULL;
    int32_t *dstatus = NULL;
    long long bad = -1;
    int host_ok = 1;
    if (!xf || !s_host || !s_dev || !q_host || !q_dev || cudaMalloc((void **)&dx, n * 2 + 16) ||
        cudaMalloc((void **)&dq, n + 8) || cudaMalloc((void **)&ds, ns * 4) || cudaMalloc((void **)&dstatus, 4))
        goto out;
    for (long long e = 0; e < mats; e++) {
        for (size_t i = 0; i < per; i++)
            xf[i] = bf16_to_f32(x[e * per + i]);
        host_ok &= mok_quant_fp8_block_weights(xf, rows, k, q_host + e * per, s_host + e * (ns / mats)) == 0;
    }
    cudaMemcpy(dx, x, n * 2, cudaMemcpyHostToDevice);
    cudaMemset(dq, 0xAB, n);
    cudaMemset(ds, 0xAB, ns * 4);
    cudaMemset(dstatus, 0, 4);
    if (mok_quant_fp8_block_weights_bf16(dx, mats, rows, k, dq, ds, dstatus, NULL) != 0 ||
        cudaDeviceSynchronize() != cudaSuccess)
        goto out;
    cudaMemcpy(q_dev, dq, n, cudaMemcpyDeviceToHost);
    cudaMemcpy(s_dev, ds, ns * 4, cudaMemcpyDeviceToHost);
    cudaMemcpy(status_out, dstatus, 4, cudaMemcpyDeviceToHost);
    bad = 0;
    if (host_ok) { /* a refused input leaves the host's q incomplete: only the status is compared then */
        for (size_t i = 0; i < n; i++)
            bad += q_dev[i] != q_host[i];
        for (size_t i = 0; i < ns; i++)
            bad += memcmp(&s_dev[i], &s_host[i], 4) != 0;
    }
out:
    free(xf), free(s_host), free(s_dev), free(q_host), free(q_dev);
    cudaFree(dx), cudaFree(dq), cudaFree(ds), cudaFree(dstatus);
    return bad;
}

/* The weight quantizer: 3 stacked 256 x 384 matrices (18 blocks) with a magnitude per block from 1e-6 to 1e4, one
 * block of zeros, one of e4m3 ties and subnormals at scale 1, one whose amax is its last element (negative); then a
 * NaN and an infinity, each in one block, must set the status; then 896 blocks, more than a GPU holds resident, so
 * the kernel's CTAs loop; then the arguments it refuses. */
static void test_weights(void)
{
    enum { MATS = 3, WR = 256, WK = 384, NB = MATS * (WR / 128) * (WK / 128) };
    static uint16_t w[MATS * WR * WK];
    for (int e = 0; e < MATS; e++)
        for (int r = 0; r < WR; r++)
            for (int c = 0; c < WK; c++) {
                int b = (e * (WR / 128) + r / 128) * (WK / 128) + c / 128, br = r % 128, bc = c % 128;
                float mag = powf(10.0f, -6.0f + 10.0f * (float)((b * 7) % NB) / (NB - 1));
                float v = mag * rnd_pm1();
                if (b == 4)
                    v = 0.0f;
                if (b == 9) /* amax 448 (scale exactly 1), the rest on e4m3 ties and subnormals */
                    v = br == 5 && bc == 0 ? 448.0f : (float)(bc % 16) * 0.5f * 0.001953125f + 1.0625f * (br % 3);
                if (b == 13) /* small values, the block's largest magnitude in its last element */
                    v = br == 127 && bc == 127 ? -3.0f * mag : 0.01f * mag * rnd_pm1();
                w[((size_t)e * WR + r) * WK + c] = f32_to_bf16(v);
            }
    int32_t status = -1;
    long long bad = weights_vs_host(w, MATS, WR, WK, &status);
    CHECK(bad == 0 && status == 0, "fp8_block weights: %lld values + scales differ from the host (-1: no run), status %d",
          bad, status);

    size_t at = ((size_t)2 * WR + 130) * WK + 200; /* matrix 2, block row 1, block column 1 */
    uint16_t keep = w[at];
    w[at] = 0x7FC1; /* NaN */
    status = 0;
    CHECK(weights_vs_host(w, MATS, WR, WK, &status) == 0 && status == 1, "weights: a NaN did not set the status (%d)",
          status);
    w[at] = keep;
    w[(size_t)7 * WK + 5] = 0xFF80; /* -inf, matrix 0's first block */
    status = 0;
    CHECK(weights_vs_host(w, MATS, WR, WK, &status) == 0 && status == 1,
          "weights: an infinity did not set the status (%d)", status);

    enum { LM = 4, LR = 512, LK = 7168 };
    uint16_t *big = malloc((size_t)LM * LR * LK * 2);
    CHECK(big != NULL, "allocation");
    if (big) {
        for (size_t i = 0; i < (size_t)LM * LR * LK; i++) {
            size_t r = i / LK, b = r / 128 * (LK / 128) + i % LK / 128;
            big[i] = f32_to_bf16(ldexpf(rnd_pm1(), (int)(b % 41) - 20));
        }
        status = -1;
        bad = weights_vs_host(big, LM, LR, LK, &status);
        CHECK(bad == 0 && status == 0, "weights %d x %d x %d: %lld values + scales differ (-1: no run), status %d", LM,
              LR, LK, bad, status);
        free(big);
    }

    uint16_t *dx = NULL;
    uint8_t *dq = NULL;
    float *ds = NULL;
    int32_t *dstatus = NULL;
    if (cudaMalloc((void **)&dx, 4 * 128 * 128 * 2) || cudaMalloc((void **)&dq, 4 * 128 * 128) ||
        cudaMalloc((void **)&ds, 16) || cudaMalloc((void **)&dstatus, 4)) {
        CHECK(0, "allocation");
    } else {
        CHECK(mok_quant_fp8_block_weights_bf16(dx, 1, 200, 128, dq, ds, dstatus, NULL) == (int)cudaErrorInvalidValue,
              "weights: rows not a multiple of 128 accepted");
        CHECK(mok_quant_fp8_block_weights_bf16(dx, 1, 128, 192, dq, ds, dstatus, NULL) == (int)cudaErrorInvalidValue,
              "weights: k not a multiple of 128 accepted");
        CHECK(mok_quant_fp8_block_weights_bf16(dx + 1, 1, 128, 128, dq, ds, dstatus, NULL) == (int)cudaErrorInvalidValue,
              "weights: a w not 16-byte aligned accepted");
        CHECK(mok_quant_fp8_block_weights_bf16(dx, 0, 128, 128, dq, ds, dstatus, NULL) == 0, "weights: no matrices");
    }
    cudaFree(dx), cudaFree(dq), cudaFree(ds), cudaFree(dstatus);
}

/* Device values dq (nq bytes) and scales ds (ns scales of `unit` bytes) against the host's: the counts that differ
 * (a scale compared byte for byte: fp32 bits or an e8m0 byte). */
static void count_diffs(const uint8_t *dq, const uint8_t *q_host, size_t nq, const void *ds, const void *s_host,
                        size_t ns, size_t unit, int *bad_q, int *bad_s)
{
    static uint8_t q[1 << 16], sc[1 << 14];
    *bad_q = *bad_s = 0;
    if (nq > sizeof q || ns * unit > sizeof sc) {
        *bad_q = *bad_s = -1;
        return;
    }
    cudaMemcpy(q, dq, nq, cudaMemcpyDeviceToHost);
    cudaMemcpy(sc, ds, ns * unit, cudaMemcpyDeviceToHost);
    for (size_t i = 0; i < nq; i++)
        *bad_q += q[i] != q_host[i];
    for (size_t i = 0; i < ns; i++)
        *bad_s += memcmp(sc + i * unit, (const uint8_t *)s_host + i * unit, unit) != 0;
}

/* Every positive finite bf16 (0x0001 .. 0x7F7F) as the largest magnitude of one block (mx: 32 values, else 1 x 128),
 * at a position and sign drawn per block, the block's other values that amax times uniform (-1, 1) in bf16; a last
 * block of zeros. Rows of 4096. The separate kernel and the lane-group quantizer against the host, byte for byte:
 * every e8m0 exponent and fp8_block scale the formats can have, and (fp8_block) enough values near an e4m3 rounding
 * boundary that encode8_block's dividing path runs (their count is printed: quotients within 32 ulps of a midpoint of
 * e4m3's normal range, by the host's arithmetic); mxfp8 also on rows one element off alignment (the thread-per-block
 * kernel). */
static void test_every_amax(int mx)
{
    enum { K = 4096, NB = 0x7F80 };
    const int bs = mx ? 32 : 128, rows = NB * bs / K;
    const size_t n = (size_t)NB * bs, ns = NB;
    uint16_t *x = malloc(n * 2);
    float *xf = malloc(n * 4), *s_host = malloc(ns * 4);
    uint8_t *q_host = malloc(n), *q_dev = malloc(n), *s_dev = malloc(ns * 4), *s8_host = malloc(ns);
    uint16_t *dx = NULL;
    uint8_t *dq = NULL, *ds = NULL;
    int32_t *dstatus = NULL;
    if (!x || !xf || !s_host || !q_host || !q_dev || !s_dev || !s8_host || cudaMalloc((void **)&dx, (n + 8) * 2) ||
        cudaMalloc((void **)&dq, n + 8) || cudaMalloc((void **)&ds, ns * 4) || cudaMalloc((void **)&dstatus, 4)) {
        CHECK(0, "allocation");
        goto out;
    }
    for (size_t b = 0; b < ns; b++) {
        const uint16_t amax = b + 1 < ns ? (uint16_t)(b + 1) : 0;
        const float a = bf16_to_f32(amax);
        const size_t at = (b * 2654435761u) % (size_t)bs;
        for (int i = 0; i < bs; i++) {
            uint16_t v = (size_t)i == at ? amax : f32_to_bf16(a * rnd_pm1());
            if ((size_t)i == at && (b * 40503u) & 64u)
                v |= 0x8000u;
            x[b * bs + i] = v;
            xf[b * bs + i] = bf16_to_f32(v);
        }
    }
    long near = 0;
    if (mx) {
        CHECK(mok_quant_mxfp8(xf, (size_t)rows, K, q_host, s8_host) == 0, "every amax: host mxfp8");
    } else {
        CHECK(mok_quant_fp8_block_rows(xf, (size_t)rows, K, q_host, s_host) == 0, "every amax: host fp8_block");
        for (size_t i = 0; i < n; i++) {
            const float q = fabsf(xf[i] / s_host[i / 128]);
            uint32_t bits;
            memcpy(&bits, &q, 4);
            const long d = (long)(bits & 0xFFFFFu) - 0x80000L;
            near += q >= 0.015625f && q <= 448.0f && d >= -32 && d <= 32;
        }
    }
    static const char *const how[3] = {"kernel", "by lane groups", "kernel, unaligned"};
    for (int v = 0; v < (mx ? 3 : 2); v++) { /* v 2: x and q one element past their allocations' alignment */
        const int lanes = v == 1, off = v == 2; /* dx and dq hold 8 elements more than n for it */
        cudaMemcpy(dx + off, x, n * 2, cudaMemcpyHostToDevice);
        cudaMemset(dq, 0xEE, n + 8);
        cudaMemset(ds, 0xEE, ns * 4);
        cudaMemset(dstatus, 0, 4);
        int rc = lanes ? mok_test_quant_lanes(dx, rows, K, mx, dq, ds, NULL)
                 : mx  ? mok_quant_mxfp8_bf16(dx + off, rows, K, dq + off, ds, dstatus, NULL)
                       : mok_quant_fp8_block_bf16(dx, rows, K, dq, (float *)ds, dstatus, NULL);
        if (rc != 0 || cudaDeviceSynchronize() != cudaSuccess) {
            CHECK(0, "every amax: %s %s launch", mx ? "mxfp8" : "fp8_block", how[v]);
            continue;
        }
        cudaMemcpy(q_dev, dq + off, n, cudaMemcpyDeviceToHost);
        cudaMemcpy(s_dev, ds, ns * (mx ? 1 : 4), cudaMemcpyDeviceToHost);
        long bad_q = 0, bad_s = 0;
        for (size_t i = 0; i < n; i++)
            bad_q += q_dev[i] != q_host[i];
        for (size_t i = 0; i < ns; i++)
            bad_s += mx ? s_dev[i] != s8_host[i] : memcmp(s_dev + 4 * i, &s_host[i], 4) != 0;
        CHECK(bad_q == 0 && bad_s == 0, "every amax, %s %s: %ld values and %ld scales differ from the host",
              mx ? "mxfp8" : "fp8_block", how[v], bad_q, bad_s);
    }
    printf("every amax (%s): %zu blocks, %zu values%s", mx ? "mxfp8" : "fp8_block", ns, n, mx ? "\n" : "");
    if (!mx)
        printf(", %ld within 32 ulps of an e4m3 rounding boundary\n", near);
out:
    free(x), free(xf), free(s_host), free(q_host), free(q_dev), free(s_dev), free(s8_host);
    cudaFree(dx), cudaFree(dq), cudaFree(ds), cudaFree(dstatus);
}

int main(void)
{
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev < 1) {
        printf("SKIP: no GPU\n");
        return 77;
    }
    enum { ROWS = 64, K = 512 };
    static uint16_t x[ROWS * K];
    static float xf[ROWS * K];
    static uint8_t q_host[ROWS * K], s8_host[ROWS * K / 32];
    static float sb_host[ROWS * K / 128];
    srand(7);
    for (int r = 0; r < ROWS; r++) {
        float scale = powf(10.0f, -6.0f + 10.0f * r / (ROWS - 1));
        for (int i = 0; i < K; i++) {
            float v = r == 3 ? 0.0f : scale * ((float)rand() / RAND_MAX * 2 - 1);
            if (r == 5) /* e4m3 ties and subnormals at a block scale of 1 (amax 448 in each block) */
                v = i % 32 == 0 ? 448.0f : (float)(i % 16) * 0.5f * 0.001953125f + 1.0625f * (i % 3);
            x[r * K + i] = f32_to_bf16(v);
            xf[r * K + i] = bf16_to_f32(x[r * K + i]);
        }
    }
    CHECK(mok_quant_mxfp8(xf, ROWS, K, q_host, s8_host) == 0, "host mxfp8");
    uint16_t *dx = NULL;
    uint8_t *dq = NULL, *ds8 = NULL;
    float *dsb = NULL;
    int32_t *dstatus = NULL, status = 0;
    if (cudaMalloc((void **)&dx, sizeof x) || cudaMalloc((void **)&dq, sizeof q_host) ||
        cudaMalloc((void **)&ds8, sizeof s8_host) || cudaMalloc((void **)&dsb, sizeof sb_host) ||
        cudaMalloc((void **)&dstatus, 4)) {
        printf("FAIL: allocation\n");
        return 1;
    }
    cudaMemcpy(dx, x, sizeof x, cudaMemcpyHostToDevice);
    cudaMemset(dstatus, 0, 4);
    CHECK(mok_quant_mxfp8_bf16(dx, ROWS, K, dq, ds8, dstatus, NULL) == 0, "mxfp8 launch");
    cudaMemcpy(&status, dstatus, 4, cudaMemcpyDeviceToHost);
    int bad_q = 0, bad_s = 0;
    count_diffs(dq, q_host, ROWS * K, ds8, s8_host, ROWS * K / 32, 1, &bad_q, &bad_s);
    CHECK(bad_q == 0 && bad_s == 0 && status == 0, "mxfp8: %d values and %d scales differ from the host, status %d",
          bad_q, bad_s, status);
    /* the megakernel's push quantizer (quads per block of 32) on the same rows */
    cudaMemset(dq, 0xEE, sizeof q_host);
    CHECK(mok_test_quant_lanes(dx, ROWS, K, 1, dq, ds8, NULL) == 0, "mxfp8 lanes launch");
    count_diffs(dq, q_host, ROWS * K, ds8, s8_host, ROWS * K / 32, 1, &bad_q, &bad_s);
    CHECK(bad_q == 0 && bad_s == 0, "mxfp8 by quads: %d values and %d scales differ from the host", bad_q, bad_s);

    CHECK(mok_quant_fp8_block_rows(xf, ROWS, K, q_host, sb_host) == 0, "host fp8_block");
    CHECK(mok_quant_fp8_block_bf16(dx, ROWS, K, dq, dsb, dstatus, NULL) == 0, "fp8_block launch");
    count_diffs(dq, q_host, ROWS * K, dsb, sb_host, ROWS * K / 128, 4, &bad_q, &bad_s);
    CHECK(bad_q == 0 && bad_s == 0, "fp8_block: %d values and %d scales differ from the host", bad_q, bad_s);
    /* the megakernel's push and h quantizer (half warps per block of 128) on the same rows */
    cudaMemset(dq, 0xEE, sizeof q_host);
    CHECK(mok_test_quant_lanes(dx, ROWS, K, 0, dq, dsb, NULL) == 0, "fp8_block lanes launch");
    count_diffs(dq, q_host, ROWS * K, dsb, sb_host, ROWS * K / 128, 4, &bad_q, &bad_s);
    CHECK(bad_q == 0 && bad_s == 0, "fp8_block by half warps: %d values and %d scales differ from the host", bad_q,
          bad_s);

    x[7 * K + 9] = 0x7FC1; /* a NaN */
    cudaMemcpy(dx, x, sizeof x, cudaMemcpyHostToDevice);
    cudaMemset(dstatus, 0, 4);
    CHECK(mok_quant_mxfp8_bf16(dx, ROWS, K, dq, ds8, dstatus, NULL) == 0, "NaN launch");
    cudaMemcpy(&status, dstatus, 4, cudaMemcpyDeviceToHost);
    CHECK(status == 1, "a NaN input did not set the status (%d)", status);
    CHECK(mok_quant_mxfp8_bf16(dx, ROWS, 100, dq, ds8, dstatus, NULL) == (int)cudaErrorInvalidValue,
          "k not a multiple of 32 accepted");
    cudaFree(dx), cudaFree(dq), cudaFree(ds8), cudaFree(dsb), cudaFree(dstatus);
    test_weights();
    test_every_amax(1);
    test_every_amax(0);
    printf("test_gpu_quant: %s\n", failures ? "FAILED" : "all passed");
    return failures ? 1 : 0;
}
