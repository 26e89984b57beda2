/* test_gpu_quant: the GPU's FP8 quantizers (kernels/util/quant.cu) against the host reference (src/fp8.c), byte for
 * byte: rows of bf16 at scales from 1e-6 to 1e4, a row of zeros, values on e4m3 ties and subnormals; a NaN input
 * flags the status. Exit 0 pass, 1 fail, 77 without a GPU. */
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fp8.h"
#include "mok_kernels.h"

#include "check.h"

static uint16_t f32_to_bf16(float f) /* round to nearest even, as the fills do */
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return (uint16_t)((u + 0x7FFFu + ((u >> 16) & 1)) >> 16);
}

static float bf16_to_f32(uint16_t b)
{
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
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
    static uint8_t q_host[ROWS * K], q_dev[ROWS * K], s8_host[ROWS * K / 32], s8_dev[ROWS * K / 32];
    static float sb_host[ROWS * K / 128], sb_dev[ROWS * K / 128];
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
    if (cudaMalloc((void **)&dx, sizeof x) || cudaMalloc((void **)&dq, sizeof q_dev) || cudaMalloc((void **)&ds8, sizeof s8_dev) ||
        cudaMalloc((void **)&dsb, sizeof sb_dev) || cudaMalloc((void **)&dstatus, 4)) {
        printf("FAIL: allocation\n");
        return 1;
    }
    cudaMemcpy(dx, x, sizeof x, cudaMemcpyHostToDevice);
    cudaMemset(dstatus, 0, 4);
    CHECK(mok_quant_mxfp8_bf16(dx, ROWS, K, dq, ds8, dstatus, NULL) == 0, "mxfp8 launch");
    cudaMemcpy(q_dev, dq, sizeof q_dev, cudaMemcpyDeviceToHost);
    cudaMemcpy(s8_dev, ds8, sizeof s8_dev, cudaMemcpyDeviceToHost);
    cudaMemcpy(&status, dstatus, 4, cudaMemcpyDeviceToHost);
    int bad_q = 0, bad_s = 0;
    for (int i = 0; i < ROWS * K; i++)
        bad_q += q_dev[i] != q_host[i];
    for (int i = 0; i < ROWS * K / 32; i++)
        bad_s += s8_dev[i] != s8_host[i];
    CHECK(bad_q == 0 && bad_s == 0 && status == 0, "mxfp8: %d values and %d scales differ from the host, status %d",
          bad_q, bad_s, status);

    CHECK(mok_quant_fp8_block_rows(xf, ROWS, K, q_host, sb_host) == 0, "host fp8_block");
    CHECK(mok_quant_fp8_block_bf16(dx, ROWS, K, dq, dsb, dstatus, NULL) == 0, "fp8_block launch");
    cudaMemcpy(q_dev, dq, sizeof q_dev, cudaMemcpyDeviceToHost);
    cudaMemcpy(sb_dev, dsb, sizeof sb_dev, cudaMemcpyDeviceToHost);
    bad_q = bad_s = 0;
    for (int i = 0; i < ROWS * K; i++)
        bad_q += q_dev[i] != q_host[i];
    for (int i = 0; i < ROWS * K / 128; i++)
        bad_s += memcmp(&sb_dev[i], &sb_host[i], 4) != 0;
    CHECK(bad_q == 0 && bad_s == 0, "fp8_block: %d values and %d scales differ from the host", bad_q, bad_s);

    x[7 * K + 9] = 0x7FC1; /* a NaN */
    cudaMemcpy(dx, x, sizeof x, cudaMemcpyHostToDevice);
    cudaMemset(dstatus, 0, 4);
    CHECK(mok_quant_mxfp8_bf16(dx, ROWS, K, dq, ds8, dstatus, NULL) == 0, "NaN launch");
    cudaMemcpy(&status, dstatus, 4, cudaMemcpyDeviceToHost);
    CHECK(status == 1, "a NaN input did not set the status (%d)", status);
    CHECK(mok_quant_mxfp8_bf16(dx, ROWS, 100, dq, ds8, dstatus, NULL) == (int)cudaErrorInvalidValue,
          "k not a multiple of 32 accepted");
    cudaFree(dx), cudaFree(dq), cudaFree(ds8), cudaFree(dsb), cudaFree(dstatus);
    printf("test_gpu_quant: %s\n", failures ? "FAILED" : "all passed");
    return failures ? 1 : 0;
}
