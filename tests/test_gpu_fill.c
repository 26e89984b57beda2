/* test_gpu_fill: the seeded input fills (kernels/util/fill.cu) that every implementation and the reference share. On 4M
 * elements of each: uniform in [-s, s) with mean 0 and standard deviation s / sqrt 3; normal with mean 0, the
 * asked standard deviation and the normal's 1- and 3-sigma shares; both bitwise the same when regenerated, and
 * different for another tensor id; rounded to 3 mantissa bits, every value has its low 4 bits clear and is the
 * full-precision value to within half a step. Exit 0 pass, 1 fail, 77 without a GPU. */
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mok_kernels.h"

static int failures;
#define CHECK(cond, ...)                                                                                     \
    do {                                                                                                     \
        if (!(cond)) {                                                                                       \
            printf("FAIL %s:%d: ", __FILE__, __LINE__);                                                      \
            printf(__VA_ARGS__);                                                                             \
            printf("\n");                                                                                    \
            failures++;                                                                                      \
        }                                                                                                    \
    } while (0)

static float bf16_to_f32(uint16_t b)
{
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

typedef int (*fill_fn)(uint16_t *, size_t, uint64_t, uint64_t, float, mok_stream_t);

/* the normal fill at full precision, in fill_fn's shape */
static int fill_normal(uint16_t *dst, size_t n, uint64_t seed, uint64_t id, float std, mok_stream_t stream)
{
    return mok_fill_bf16(dst, n, seed, id, 1, std, 7, stream);
}

/* Fills n elements twice with tensor id 1 and once with id 2; checks repeatability and returns the values. */
static uint16_t *fill_three(fill_fn fill, size_t n, float param, const char *name)
{
    uint16_t *d = NULL, *h[3];
    if (cudaMalloc((void **)&d, n * 2) != cudaSuccess) {
        CHECK(0, "%s: cudaMalloc", name);
        return NULL;
    }
    for (int i = 0; i < 3; i++) {
        h[i] = malloc(n * 2);
        CHECK(fill(d, n, 42, i == 2 ? 2 : 1, param, NULL) == 0, "%s: launch", name);
        CHECK(cudaMemcpy(h[i], d, n * 2, cudaMemcpyDeviceToHost) == cudaSuccess, "%s: copy back", name);
    }
    CHECK(memcmp(h[0], h[1], n * 2) == 0, "%s: the same seed and tensor id gave different values", name);
    size_t same = 0;
    for (size_t i = 0; i < n; i++)
        same += h[0][i] == h[2][i];
    CHECK(same < n / 100, "%s: another tensor id gave %zu of %zu equal values", name, same, n);
    cudaFree(d), free(h[1]), free(h[2]);
    return h[0];
}

int main(void)
{
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
        printf("SKIP: no GPU\n");
        return 77;
    }
    const size_t n = (size_t)1 << 22;
    /* uniform, spread 0.5 */
    uint16_t *u = fill_three(mok_fill_uniform_bf16, n, 0.5f, "uniform");
    if (u) {
        double sum = 0, sq = 0, lo = 1e30, hi = -1e30;
        for (size_t i = 0; i < n; i++) {
            double v = bf16_to_f32(u[i]);
            sum += v, sq += v * v, lo = v < lo ? v : lo, hi = v > hi ? v : hi;
        }
        double mean = sum / n, sd = sqrt(sq / n - mean * mean);
        printf("uniform(0.5): mean %.5f sd %.5f (want %.5f) range [%.4f, %.4f]\n", mean, sd, 0.5 / sqrt(3.0), lo, hi);
        CHECK(fabs(mean) < 0.002, "uniform mean %g", mean);
        CHECK(fabs(sd / (0.5 / sqrt(3.0)) - 1) < 0.01, "uniform sd %g", sd);
        CHECK(lo >= -0.5 && hi <= 0.5 && lo < -0.49 && hi > 0.49, "uniform range [%g, %g]", lo, hi);
        free(u);
    }
    /* normal, standard deviation 0.25 */
    uint16_t *g = fill_three(fill_normal, n, 0.25f, "normal");
    if (g) {
        double sum = 0, sq = 0, peak = 0;
        size_t in1 = 0, in3 = 0, nonfinite = 0;
        for (size_t i = 0; i < n; i++) {
            double v = bf16_to_f32(g[i]);
            nonfinite += !isfinite(v);
            sum += v, sq += v * v, peak = fabs(v) > peak ? fabs(v) : peak;
            in1 += fabs(v) <= 0.25, in3 += fabs(v) <= 0.75;
        }
        double mean = sum / n, sd = sqrt(sq / n - mean * mean);
        printf("normal(0.25): mean %.5f sd %.5f, within 1 sd %.4f (0.6827), within 3 sd %.5f (0.99730), max |x| %.3f\n",
               mean, sd, (double)in1 / n, (double)in3 / n, peak);
        CHECK(nonfinite == 0, "normal: %zu values not finite", nonfinite);
        CHECK(fabs(mean) < 0.002, "normal mean %g", mean);
        CHECK(fabs(sd / 0.25 - 1) < 0.01, "normal sd %g", sd);
        /* bf16 rounding moves values across the 1-sd edge a little: 0.004 is ~8 binomial standard errors */
        CHECK(fabs((double)in1 / n - 0.6827) < 0.004, "normal: %g within 1 sd", (double)in1 / n);
        CHECK(fabs((double)in3 / n - 0.9973) < 0.0005, "normal: %g within 3 sd", (double)in3 / n);
        CHECK(peak > 1.0 && peak < 1.6, "normal: max |x| %g (4 to 6.4 sd expected for 4M draws)", peak);
        free(g);
    }
    /* mantissa_bits 3: the same normal values rounded to fp8 e4m3's precision */
    uint16_t *d = NULL, *full = malloc(n * 2), *few = malloc(n * 2);
    if (cudaMalloc((void **)&d, n * 2) == cudaSuccess && full && few) {
        CHECK(mok_fill_bf16(d, n, 42, 1, 1, 0.25f, 7, NULL) == 0, "bits 7: launch");
        CHECK(cudaMemcpy(full, d, n * 2, cudaMemcpyDeviceToHost) == cudaSuccess, "bits 7: copy back");
        CHECK(mok_fill_bf16(d, n, 42, 1, 1, 0.25f, 3, NULL) == 0, "bits 3: launch");
        CHECK(cudaMemcpy(few, d, n * 2, cudaMemcpyDeviceToHost) == cudaSuccess, "bits 3: copy back");
        size_t low = 0, far = 0, changed = 0;
        for (size_t i = 0; i < n; i++) {
            low += (few[i] & 0xF) != 0;
            changed += few[i] != full[i];
            double a = bf16_to_f32(full[i]), b = bf16_to_f32(few[i]);
            far += fabs(a - b) > fabs(a) * (1.0 / 16) + 1e-30; /* half a step of 3 bits: 2^-4 of the value */
        }
        printf("normal(0.25) at 3 mantissa bits: %zu values with low bits set, %zu off by more than half a step, "
               "%.1f%% changed\n", low, far, 100.0 * changed / n);
        CHECK(low == 0 && far == 0, "3 mantissa bits: %zu with low bits, %zu too far", low, far);
        CHECK(changed > n / 2, "3 mantissa bits changed only %zu of %zu values", changed, n);
    } else {
        CHECK(0, "mantissa test: allocation");
    }
    cudaFree(d), free(full), free(few);
    printf("test_gpu_fill: %s (%d failures)\n", failures ? "FAILED" : "all passed", failures);
    return failures ? 1 : 0;
}
