/* test_gpu_gemm: the expert GEMMs (kernels/mok_gemm.h) against the fp32 SIMT reference on random, ragged groups:
 * empty experts, one row, sizes that are not a multiple of the tile. GEMM1 with SwiGLU and GEMM2, the portable
 * mma.sync kernel everywhere and the Hopper wgmma kernel on sm_90 for each tile/stage configuration it supports.
 * Output is poisoned first, so a row the kernel forgot is NaN and fails; rows of other groups must stay intact. */
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bf16.h"
#include "mok_gemm.h"
#include "mok_kernels.h"
#include "testing/mok_test_kernels.h"

static int failures;

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

/* The Hopper kernel fed as in the layer: A's rows are poison at launch and arrive chunk by chunk (last chunk
 * first, after a 2 ms sleep) from another stream, each chunk released through its ready counter. A tile that
 * loaded rows before their counter reached the target would compute NaN from the poison. The GEMM leaves one SM
 * free, so the feeding block runs whichever kernel the GPU starts first. */
static void run_fed(const struct case_desc *cd, const struct mok_gemm_args *base, uint16_t *a, const float *ref,
                    size_t nout, uint16_t *y)
{
    enum { CHUNK = 32 };
    int rows = nout / cd->n_out, cap = base->rows_capacity, nchunks = (cap + CHUNK - 1) / CHUNK, sms = 0;
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
    int32_t *target = calloc((size_t)nchunks, sizeof(int32_t)), *d_ready, *d_target;
    for (int r = 0; r < rows; r++) /* every row below `rows` is a real row (no padding in these cases) */
        target[r / CHUNK]++;
    uint16_t *a_src;
    cudaMalloc((void **)&a_src, (size_t)cap * cd->k * 2);
    cudaMalloc((void **)&d_ready, sizeof(int32_t) * nchunks);
    cudaMalloc((void **)&d_target, sizeof(int32_t) * nchunks);
    cudaMemcpy(a_src, a, (size_t)cap * cd->k * 2, cudaMemcpyDeviceToDevice);
    cudaMemcpy(d_target, target, sizeof(int32_t) * nchunks, cudaMemcpyHostToDevice);
    cudaMemset(d_ready, 0, sizeof(int32_t) * nchunks);
    mok_poison_bf16(a, (size_t)rows * cd->k, NULL);
    mok_poison_bf16(base->c, (size_t)cap * cd->n_out, NULL);
    struct mok_gemm_args args = *base;
    args.ready = d_ready, args.ready_target = d_target, args.ready_rows = CHUNK;
    struct mok_gemm_sm90_config cfg = {128, 128, 3, sms - 1, 1, 0, 0, 0, 0};
    char why[256] = "";
    cudaStream_t feed, gemm;
    cudaStreamCreateWithFlags(&feed, cudaStreamNonBlocking);
    cudaStreamCreateWithFlags(&gemm, cudaStreamNonBlocking);
    cudaDeviceSynchronize();
    int rc = -1;
    if (mok_gemm_sm90_supports(&args, &cfg, why, sizeof why)) {
        rc = mok_gemm_feed(a, a_src, rows, cd->k, CHUNK, d_ready, d_target, 2000000, (mok_stream_t)feed);
        if (!rc)
            rc = mok_gemm_sm90(&args, &cfg, (mok_stream_t)gemm);
    }
    cudaError_t e = cudaDeviceSynchronize();
    if (rc || e != cudaSuccess) {
        printf("FAIL %-28s %-22s launch %d / %s / %s\n", cd->name, "sm90 fed by counters", rc, cudaGetErrorString(e),
               why);
        failures++;
        if (e != cudaSuccess)
            exit(1);
    } else {
        cudaMemcpy(y, base->c, (size_t)cap * cd->n_out * 2, cudaMemcpyDeviceToHost);
        long long nans = 0;
        double err = compare(y, ref, nout, &nans);
        int ok = err <= 1e-2 && nans == 0;
        printf("%s %-28s %-22s max err %.2e of max|ref|, %lld NaN (rows read before their counter)\n",
               ok ? "ok  " : "FAIL", cd->name, "sm90 fed by counters", err, nans);
        failures += !ok;
    }
    cudaStreamDestroy(feed), cudaStreamDestroy(gemm);
    cudaFree(a_src), cudaFree(d_ready), cudaFree(d_target);
    free(target);
}

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
    /* stages 0: the deepest ring that fits; sms 7 (8 with clusters): fewer CTAs than tiles, so each CTA walks
     * several; cluster 2: B multicast to CTA pairs, odd tile counts leave the second CTA of a pair idle rows */
    struct mok_gemm_sm90_config cfgs[] = {
        {128, 128, 3, 0, 1, 0, 0, 0, 0}, {128, 128, 4, 0, 1, 0, 0, 0, 0},
        {128, 256, 3, 0, 1, 0, 0, 0, 0}, {128, 256, 0, 0, 1, 0, 0, 0, 0},
        {128, 256, 0, 7, 1, 0, 0, 0, 0}, {128, 128, 4, 0, 2, 0, 0, 0, 0},
        {128, 256, 0, 0, 2, 0, 0, 0, 0}, {128, 256, 3, 8, 2, 0, 0, 0, 0},
        /* lockstep: grid barriers every 1 or 3 k blocks, with a partial last wave (7 CTAs) and clusters */
        {128, 256, 0, 0, 1, 1, 0, 0, 0}, {128, 128, 4, 7, 1, 3, 0, 0, 0},
        {128, 256, 0, 0, 2, 3, 0, 0, 0}, {128, 256, 3, 8, 2, 1, 0, 0, 0},
        /* raster 1: n-major tile order within each group, also with a partial wave, clusters and lockstep */
        {128, 256, 0, 0, 1, 0, 1, 0, 0}, {128, 128, 4, 7, 1, 3, 1, 0, 0}, {128, 256, 0, 8, 2, 0, 1, 0, 0},
        /* 256 x 128 tiles: two 64-row sub-tiles per consumer warpgroup, groups ending inside either of them */
        {256, 128, 0, 0, 1, 0, 0, 0, 0}, {256, 128, 3, 7, 1, 0, 1, 0, 0},
        {256, 128, 0, 8, 2, 0, 0, 0, 0}, {256, 128, 0, 0, 1, 2, 0, 0, 0},
        /* 64-row tiles (the warpgroups split 256 columns): ragged groups, every stage count, lockstep, raster */
        {64, 256, 0, 0, 1, 0, 0, 0, 0}, {64, 256, 3, 7, 1, 0, 1, 0, 0},
        {64, 256, 2, 0, 1, 2, 0, 0, 0}, {64, 256, 0, 8, 1, 0, 1, 0, 0},
        /* 4 stages of 128 x 256: without SwiGLU the tile is staged and stored in two rounds of 128 columns (the
         * 64 KiB staging leaves room for 3), with a partial wave, raster, lockstep and clusters */
        {128, 256, 4, 0, 1, 0, 0, 0, 0}, {128, 256, 4, 7, 1, 0, 1, 0, 0},
        {128, 256, 4, 0, 1, 3, 0, 0, 0}, {128, 256, 4, 8, 2, 0, 0, 0, 0}};
    for (int v = -1; v < (int)(sizeof(cfgs) / sizeof(cfgs[0])); v++) {
        char label[96], why[256] = "";
        int rc;
        mok_poison_bf16(c, (size_t)cap * cd->n_out, NULL);
        if (v < 0) {
            snprintf(label, sizeof label, "portable");
            rc = mok_gemm_portable(&args, NULL);
        } else {
            snprintf(label, sizeof label, "sm90 t%dx%d s%d sms%d c%d ls%d r%d", cfgs[v].tile_m, cfgs[v].tile_n,
                     cfgs[v].stages, cfgs[v].sms, cfgs[v].cluster_m, cfgs[v].lockstep, cfgs[v].raster);
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
    if (sm_major == 9)
        run_fed(cd, &args, a, ref, nout, y);
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
