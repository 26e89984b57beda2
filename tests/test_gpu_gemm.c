/* test_gpu_gemm: the expert GEMMs (kernels/mok_gemm.h) against the fp32 SIMT reference on random, ragged groups:
 * empty experts, one row, sizes that are not a multiple of the tile. GEMM1 with SwiGLU and GEMM2, the portable
 * mma.sync kernel everywhere and the Hopper wgmma kernel on sm_90 for each tile/stage configuration it supports.
 * Output is poisoned first, so a row the kernel forgot is NaN and fails; rows of other groups must stay intact. */
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mok_gemm.h"
#include "mok_kernels.h"

static int failures;

static float bf16_to_f32(uint16_t b)
{
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* max |y - ref| / max |ref| over the valid rows; NaN anywhere counts as a failure */
static double compare(const uint16_t *y, const float *ref, size_t n, long long *nan_count)
{
    double amax = 0, dmax = 0;
    *nan_count = 0;
    for (size_t i = 0; i < n; i++)
        amax = fmax(amax, fabs(ref[i]));
    for (size_t i = 0; i < n; i++) {
        float v = bf16_to_f32(y[i]);
        if (!isfinite(v)) {
            (*nan_count)++;
            continue;
        }
        dmax = fmax(dmax, fabs(v - ref[i]));
    }
    return amax > 0 ? dmax / amax : dmax;
}

struct case_desc {
    const char *name;
    int groups, k, n_out, swiglu;
    int rows[8];
};

static void run_case(const struct case_desc *cd, int sm_major)
{
    int offset[9] = {0};
    for (int g = 0; g < cd->groups; g++)
        offset[g + 1] = offset[g] + cd->rows[g];
    int rows = offset[cd->groups], cap = rows + 256; /* slack past the last group: the kernel must not write it */
    int rows_b = cd->swiglu ? 2 * cd->n_out : cd->n_out;
    uint16_t *a, *b, *c, *h_ref_bf16;
    float *gref, *ref;
    int32_t *d_off;
    cudaMalloc((void **)&a, (size_t)cap * cd->k * 2);
    cudaMalloc((void **)&b, (size_t)cd->groups * rows_b * cd->k * 2);
    cudaMalloc((void **)&c, (size_t)cap * cd->n_out * 2);
    cudaMalloc((void **)&gref, (size_t)(rows + 1) * rows_b * 4);
    cudaMalloc((void **)&h_ref_bf16, (size_t)(rows + 1) * cd->n_out * 2);
    cudaMalloc((void **)&d_off, sizeof(offset));
    cudaMemcpy(d_off, offset, sizeof(offset), cudaMemcpyHostToDevice);
    mok_fill_uniform_bf16(a, (size_t)cap * cd->k, 7, 1, 1.0f, NULL);
    mok_fill_uniform_bf16(b, (size_t)cd->groups * rows_b * cd->k, 7, 2, 3.0f / sqrtf((float)cd->k), NULL);
    /* reference, group by group */
    for (int g = 0; g < cd->groups; g++)
        if (cd->rows[g])
            mok_ref_gemm_f32(a + (size_t)offset[g] * cd->k, NULL, cd->rows[g], cd->k,
                             b + (size_t)g * rows_b * cd->k, rows_b, gref + (size_t)offset[g] * rows_b, NULL, NULL);
    size_t nout = (size_t)rows * cd->n_out;
    ref = malloc(nout * 4 + 4);
    if (cd->swiglu) { /* the layer's roundings: bf16 GEMM output, bf16 SwiGLU output */
        mok_ref_swiglu(gref, rows, cd->n_out, h_ref_bf16, NULL);
        uint16_t *h = malloc(nout * 2 + 2);
        cudaMemcpy(h, h_ref_bf16, nout * 2, cudaMemcpyDeviceToHost);
        for (size_t i = 0; i < nout; i++)
            ref[i] = bf16_to_f32(h[i]);
        free(h);
    } else {
        cudaMemcpy(ref, gref, nout * 4, cudaMemcpyDeviceToHost);
    }
    struct mok_gemm_args args = {.a = a, .b = b, .c = c, .offset = d_off, .groups = cd->groups,
                                 .rows_capacity = cap, .n_out = cd->n_out, .k = cd->k, .swiglu = cd->swiglu};
    uint16_t *y = malloc((size_t)cap * cd->n_out * 2);
    struct mok_gemm_sm90_config cfgs[] = {{128, 128, 3, 0}, {128, 128, 4, 0}, {128, 256, 3, 0}, {128, 256, 4, 7}};
    for (int v = -1; v < (int)(sizeof(cfgs) / sizeof(cfgs[0])); v++) {
        char label[96], why[256] = "";
        int rc;
        mok_poison_bf16(c, (size_t)cap * cd->n_out, NULL);
        if (v < 0) {
            snprintf(label, sizeof label, "portable");
            rc = mok_gemm_portable(&args, NULL);
        } else {
            snprintf(label, sizeof label, "sm90 t%dx%d s%d sms%d", cfgs[v].tile_m, cfgs[v].tile_n, cfgs[v].stages,
                     cfgs[v].sms);
            if (sm_major != 9 || !mok_gemm_sm90_supports(&args, &cfgs[v], why, sizeof why)) {
                printf("  %-28s %-22s not supported: %s\n", cd->name, label, sm_major != 9 ? "not an sm_90 GPU" : why);
                continue;
            }
            rc = mok_gemm_sm90(&args, &cfgs[v], NULL);
        }
        cudaError_t e = cudaDeviceSynchronize();
        if (rc || e != cudaSuccess) {
            printf("FAIL %-28s %-22s launch %d / %s\n", cd->name, label, rc, cudaGetErrorString(e));
            failures++;
            if (e != cudaSuccess)
                exit(1); /* a faulted context cannot run the next case */
            continue;
        }
        cudaMemcpy(y, c, (size_t)cap * cd->n_out * 2, cudaMemcpyDeviceToHost);
        long long nans = 0, slack_written = 0;
        double err = compare(y, ref, nout, &nans);
        for (size_t i = nout; i < (size_t)cap * cd->n_out; i++) /* past the last group: still poison */
            slack_written += y[i] != 0x7FC1;
        int ok = err <= 1e-2 && nans == 0 && slack_written == 0;
        printf("%s %-28s %-22s max err %.2e of max|ref|, %lld unwritten, %lld written past the end\n",
               ok ? "ok  " : "FAIL", cd->name, label, err, nans, slack_written);
        failures += !ok;
    }
    free(y), free(ref);
    cudaFree(a), cudaFree(b), cudaFree(c), cudaFree(gref), cudaFree(h_ref_bf16), cudaFree(d_off);
}

int main(void)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
        printf("SKIP: no GPU\n");
        return 77;
    }
    struct cudaDeviceProp prop;
    cudaGetDeviceProperties(&prop, 0);
    printf("test_gpu_gemm on %s (sm_%d%d)\n", prop.name, prop.major, prop.minor);
    struct case_desc cases[] = {
        {"gemm1+swiglu ragged", 8, 512, 256, 1, {0, 1, 37, 128, 129, 300, 5, 64}},
        {"gemm2 ragged", 8, 256, 512, 0, {64, 0, 1, 200, 127, 3, 0, 256}},
        {"gemm1+swiglu one group", 1, 1024, 512, 1, {1000}},
        {"gemm2 uniform", 4, 2048, 1024, 0, {256, 256, 256, 256}},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        run_case(&cases[i], prop.major);
    printf("test_gpu_gemm: %s (%d failures)\n", failures ? "FAILED" : "all passed", failures);
    return failures ? 1 : 0;
}
