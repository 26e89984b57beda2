/* probe: NVLink peer bandwidth with every SM and the cuBLAS dense bf16 GEMM rate, measured in the run itself
 * (see probe.h). Every collective step is reached by every rank: a rank that fails locally keeps taking part in
 * the MPI calls, and each phase ends with an all-rank agreement on failure, so one rank's error never leaves the
 * others blocked in a barrier or in NCCL. */
#include "probe.h"

#include <cublas_v2.h>
#include <math.h>
#include <mpi.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "check_call.h"
#include "gemm_cublaslt_fp8.h"
#include "mok_kernels.h"
#include "stats.h"

#define PROBE_BYTES ((size_t)1 << 30) /* per copy: far beyond the 50 MB L2, so the link is what is measured */
#define PROBE_WARMUP 2
#define PROBE_ITERS 10
#define PROBE_THREADS 512
#define PROBE_BLOCKS_PER_SM 4 /* 4 x 512 = 2048 threads: a full SM, the most loads in flight for the pull */
#define GEMM_N 8192
#define GEMM_WARMUP 3
#define GEMM_WARMUP_MS 300.0 /* and at least this long: the clocks settle at the 700 W cap after ~0.1-0.3 s of load
                                (timing.warmup_ms, results/h200x2/2026-11-30-megakernel-v8 section 6) */
#define GEMM_ITERS 20
#define READ_BYTES ((size_t)4 << 30) /* DRAM read probe: 4 GiB, 80x the L2 */
#define READ_ITERS 10
#define PROBE_SEED 0x70726F6265ull /* "probe"; tensor ids below keep its tensors apart from the problems' */

#define PROBE_FAIL(...)                                                                                            \
    do {                                                                                                           \
        snprintf(err, (size_t)err_len, __VA_ARGS__);                                                               \
        goto fail;                                                                                                 \
    } while (0)
/* Every rank probes and main prints each rank's message: a probe message starts with the rank. */
#define PROBE_CHECK(lib, call) MOK_CHECK_AS(lib, call, #call, { name_rank(err, err_len, cl->rank); goto fail; })

/* err = "rank R: " + err, cut to err_len. */
static void name_rank(char *err, int err_len, int rank)
{
    char head[24];
    int n = snprintf(head, sizeof head, "rank %d: ", rank);
    if (n <= 0 || n >= err_len)
        return;
    size_t keep = strlen(err);
    if (keep > (size_t)(err_len - 1 - n))
        keep = (size_t)(err_len - 1 - n);
    memmove(err + n, err, keep);
    memcpy(err, head, (size_t)n);
    err[n + keep] = '\0';
}

/* Barrier and failure agreement in one: nobody leaves before every rank arrived, and all leave with the same
 * answer, so all take the same branch afterwards. */
static int any_failed(int fail)
{
    int any = 0;
    MPI_Allreduce(&fail, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    return any;
}

/* Median over iterations of the per-iteration max over ranks (ms); ms[] is overwritten. Collective. */
static double median_of_max(double *ms, int n)
{
    struct mok_stats st;
    MPI_Allreduce(MPI_IN_PLACE, ms, n, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    mok_stats_compute(ms, n, &st);
    return st.median;
}

/* One copy between events on the cluster stream, waited for (the next iteration starts from a barrier). */
static int copy_once(struct mok_cluster *cl, void *dst, const void *src, const struct mok_probe *p, cudaEvent_t ev[2],
                     double *ms, char *err, int err_len)
{
    float t = 0;
    PROBE_CHECK(cuda, cudaEventRecord(ev[0], cl->stream));
    PROBE_CHECK(cuda, mok_probe_copy(dst, src, (size_t)p->bytes, p->blocks, p->threads, (mok_stream_t)cl->stream));
    PROBE_CHECK(cuda, cudaEventRecord(ev[1], cl->stream));
    PROBE_CHECK(cuda, cudaEventSynchronize(ev[1]));
    PROBE_CHECK(cuda, cudaEventElapsedTime(&t, ev[0], ev[1]));
    *ms = t;
    return 0;
fail:
    return -1;
}

/* GB/s of one copy. Collective: every iteration starts from a barrier, so when several ranks are active their
 * copies overlap (the bidirectional case); inactive ranks only take part in the collectives and contribute 0,
 * so the active rank's time is the result. NAN on failure (then *fail is set on every rank). */
static double time_copy(struct mok_cluster *cl, bool active, void *dst, const void *src, const struct mok_probe *p,
                        cudaEvent_t ev[2], int *fail, char *err, int err_len)
{
    double ms[PROBE_ITERS] = {0};
    for (int it = 0; it < PROBE_WARMUP + PROBE_ITERS; it++) {
        if (any_failed(*fail))
            break; /* every rank breaks at the same iteration */
        double t = 0;
        if (active)
            *fail = copy_once(cl, dst, src, p, ev, &t, err, err_len);
        if (it >= PROBE_WARMUP)
            ms[it - PROBE_WARMUP] = t;
    }
    *fail = any_failed(*fail);
    if (*fail)
        return NAN;
    return p->bytes / (median_of_max(ms, PROBE_ITERS) * 1e-3) / 1e9;
}

/* Symmetric 2 GiB window: [0, 1 GiB) source, [1 GiB, 2 GiB) destination. Push: my source -> peer's destination
 * (SM stores over NVLink); pull: peer's source -> my destination (SM loads over NVLink). The peer is the next GPU
 * in this rank's LSA team. Collective; needs lsa_size >= 2 on every rank. */
static void probe_links(struct mok_cluster *cl, struct mok_probe *out, cudaEvent_t ev[2], int *fail, char *err,
                        int err_len)
{
    struct mok_symmem win = {0};
    void **slot = NULL;
    char *peer_base = NULL, *mine = NULL;
    bool ok = false;
    int lsa_rank = -1, peer = -1;
    if (mok_symmem_alloc(cl, 2 * PROBE_BYTES, &win, err, err_len))
        *fail = 1;
    if (any_failed(*fail))
        goto done;
    lsa_rank = mok_probe_lsa_rank(cl->nccl);
    if (lsa_rank < 0 || lsa_rank >= cl->lsa_size)
        PROBE_FAIL("rank %d: %s:%d: LSA rank %d outside a team of %d", cl->rank, __FILE__, __LINE__, lsa_rank,
                   cl->lsa_size);
    peer = (lsa_rank + 1) % cl->lsa_size;
    /* The peer's part of the window as an address of this process: only a kernel can read the window's layout */
    PROBE_CHECK(cuda, cudaMalloc((void **)&slot, sizeof(void *)));
    PROBE_CHECK(cuda, mok_probe_lsa_base((void *)win.window, peer, slot, (mok_stream_t)cl->stream));
    PROBE_CHECK(cuda, cudaMemcpyAsync(&peer_base, slot, sizeof(void *), cudaMemcpyDeviceToHost, cl->stream));
    /* random source bits (never zeros), then wait: the peer may pull them right after the next barrier */
    PROBE_CHECK(cuda, mok_fill_uniform_bf16((uint16_t *)win.ptr, PROBE_BYTES / 2, PROBE_SEED,
                                            0x100u + (unsigned)cl->rank, 1.0f, (mok_stream_t)cl->stream));
    PROBE_CHECK(cuda, cudaStreamSynchronize(cl->stream));
    if (!peer_base)
        PROBE_FAIL("rank %d: %s:%d: ncclGetLsaPointer gave NULL for LSA peer %d", cl->rank, __FILE__, __LINE__, peer);
    mine = (char *)win.ptr;
    ok = true;
fail:
    if (!ok) { /* this rank only: the first barrier in time_copy stops every rank before any copy */
        *fail = 1;
        peer_base = mine = NULL;
    }
    {
        char *peer_dst = ok ? peer_base + PROBE_BYTES : NULL, *my_dst = ok ? mine + PROBE_BYTES : NULL;
        /* alone: rank 0 only, the others wait in the barriers; both ways: every rank pushes at once */
        out->push_gbps = time_copy(cl, cl->rank == 0, peer_dst, mine, out, ev, fail, err, err_len);
        if (!*fail)
            out->pull_gbps = time_copy(cl, cl->rank == 0, my_dst, peer_base, out, ev, fail, err, err_len);
        if (!*fail)
            out->bidir_push_gbps = time_copy(cl, true, peer_dst, mine, out, ev, fail, err, err_len);
    }
done:
    /* No peer may still be writing into a window that is about to be deregistered */
    cudaStreamSynchronize(cl->stream);
    MPI_Barrier(MPI_COMM_WORLD);
    if (slot)
        cudaFree(slot);
    if (win.ptr)
        mok_symmem_free(cl, &win);
}

/* One GEMM launched on the probe's stream: 0, or -1 with err. */
typedef int (*probe_gemm_fn)(void *ctx, cudaStream_t stream, char *err, int err_len);

/* Per-rank times of GEMM_ITERS back-to-back launches of gemm, events between them so the stream timeline is measured
 * without gaps, after batches of GEMM_WARMUP until GEMM_WARMUP_MS have passed on the device (the GPU then sits at its
 * power cap). Local. */
static int time_gemm_calls(struct mok_cluster *cl, probe_gemm_fn gemm, void *ctx, double *ms, char *err, int err_len)
{
    cudaEvent_t ev[GEMM_ITERS + 1] = {0};
    int rc = -1;
    for (int i = 0; i <= GEMM_ITERS; i++)
        PROBE_CHECK(cuda, cudaEventCreate(&ev[i]));
    for (float warm_ms = 0; warm_ms < GEMM_WARMUP_MS;) {
        PROBE_CHECK(cuda, cudaEventRecord(ev[0], cl->stream));
        for (int it = 0; it < GEMM_WARMUP; it++)
            if (gemm(ctx, cl->stream, err, err_len))
                goto gemm_failed;
        PROBE_CHECK(cuda, cudaEventRecord(ev[1], cl->stream));
        PROBE_CHECK(cuda, cudaEventSynchronize(ev[1]));
        float t = 0;
        PROBE_CHECK(cuda, cudaEventElapsedTime(&t, ev[0], ev[1]));
        warm_ms += t > 0 ? t : 1.0f;
    }
    PROBE_CHECK(cuda, cudaEventRecord(ev[0], cl->stream));
    for (int it = 0; it < GEMM_ITERS; it++) {
        if (gemm(ctx, cl->stream, err, err_len))
            goto gemm_failed;
        PROBE_CHECK(cuda, cudaEventRecord(ev[it + 1], cl->stream));
    }
    PROBE_CHECK(cuda, cudaEventSynchronize(ev[GEMM_ITERS]));
    for (int i = 0; i < GEMM_ITERS; i++) {
        float t = 0;
        PROBE_CHECK(cuda, cudaEventElapsedTime(&t, ev[i], ev[i + 1]));
        ms[i] = t;
    }
    rc = 0;
    goto fail;
gemm_failed:
    name_rank(err, err_len, cl->rank);
fail:
    for (int i = 0; i <= GEMM_ITERS; i++)
        if (ev[i])
            cudaEventDestroy(ev[i]);
    return rc;
}

/* cuBLAS's TN GEMM C = A^T B, 8192^3, bf16 in and out, fp32 accumulation: the call the baselines make. */
struct bf16_gemm {
    cublasHandle_t h;
    uint16_t *buf; /* A, B, C */
};

static int bf16_gemm_once(void *ctx, cudaStream_t stream, char *err, int err_len)
{
    const struct bf16_gemm *g = ctx;
    const size_t n2 = (size_t)GEMM_N * GEMM_N;
    const float one = 1.0f, zero = 0.0f;
    (void)stream; /* the handle's */
    MOK_CHECK(cublas, cublasGemmEx(g->h, CUBLAS_OP_T, CUBLAS_OP_N, GEMM_N, GEMM_N, GEMM_N, &one, g->buf, CUDA_R_16BF,
                                   GEMM_N, g->buf + n2, CUDA_R_16BF, GEMM_N, &zero, g->buf + 2 * n2,
                                   CUDA_R_16BF, GEMM_N, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
              return -1);
    return 0;
}

static int time_gemm(struct mok_cluster *cl, double *ms, char *err, int err_len)
{
    const size_t n2 = (size_t)GEMM_N * GEMM_N;
    cublasHandle_t h = NULL;
    uint16_t *buf = NULL;
    int rc = -1;
    PROBE_CHECK(cuda, cudaMalloc((void **)&buf, 3 * n2 * sizeof(uint16_t)));
    for (int i = 0; i < 3; i++) /* A, B and C random at scale 1: zeros would flatter the tensor cores' power */
        PROBE_CHECK(cuda, mok_fill_uniform_bf16(buf + i * n2, n2, PROBE_SEED, 0x200u + (unsigned)i, 1.0f,
                                                (mok_stream_t)cl->stream));
    PROBE_CHECK(cublas, cublasCreate(&h));
    PROBE_CHECK(cublas, cublasSetStream(h, cl->stream));
    struct bf16_gemm g = {h, buf};
    rc = time_gemm_calls(cl, bf16_gemm_once, &g, ms, err, err_len);
fail:
    if (h)
        cublasDestroy(h); /* synchronizes the device, so buf is idle below */
    if (buf)
        cudaFree(buf);
    return rc;
}

/* cuBLASLt's FP8 GEMM C = A W^T, 8192^3: block-scaled (fp8_block: 1 x 128 row scales, 128 x 128 weight blocks; what
 * the fp8_block rows' rooflines take as their GEMM rate), or with per_tensor one scale per operand (the same e4m3
 * bytes, scale 1: what block scaling is measured against). */
struct fp8_gemm {
    struct mok_lt_fp8 *lt;
    bool per_tensor;
    const uint8_t *q;                /* A, then W */
    const float *a_scale, *w_lt, *ones; /* ones: two device 1.0s, 16 bytes apart */
    uint16_t *c;
};

static int fp8_gemm_once(void *ctx, cudaStream_t stream, char *err, int err_len)
{
    const struct fp8_gemm *g = ctx;
    const size_t n2 = (size_t)GEMM_N * GEMM_N;
    return g->per_tensor ? mok_lt_fp8_tensor_gemm(g->lt, stream, GEMM_N, GEMM_N, GEMM_N, g->q, g->ones, g->q + n2,
                                                  g->ones + 4, g->c, err, err_len)
                         : mok_lt_fp8_block_gemm(g->lt, stream, GEMM_N, GEMM_N, GEMM_N, g->q, g->a_scale, g->q + n2,
                                                 g->w_lt, g->c, err, err_len);
}

/* The same for cuBLASLt's FP8 GEMM (fp8_gemm above), random bf16 quantized once. Local. */
static int time_gemm_fp8(struct mok_cluster *cl, bool per_tensor, double *ms, char *err, int err_len)
{
    const size_t n2 = (size_t)GEMM_N * GEMM_N, nb = (size_t)(GEMM_N / 128);
    uint16_t *src = NULL, *c = NULL;
    uint8_t *q = NULL;
    float *scale = NULL, *w_lt = NULL;
    int32_t *status = NULL;
    struct mok_lt_fp8 *lt = NULL;
    int rc = -1;
    PROBE_CHECK(cuda, cudaMalloc((void **)&src, 2 * n2 * sizeof(uint16_t)));
    PROBE_CHECK(cuda, cudaMalloc((void **)&c, n2 * sizeof(uint16_t)));
    PROBE_CHECK(cuda, cudaMalloc((void **)&q, 2 * n2));
    PROBE_CHECK(cuda, cudaMalloc((void **)&scale, (n2 / 128 + nb * nb + 8) * sizeof(float)));
    PROBE_CHECK(cuda, cudaMalloc((void **)&w_lt, mok_lt_fp8_weight_scale_floats(GEMM_N, GEMM_N) * sizeof(float)));
    PROBE_CHECK(cuda, cudaMalloc((void **)&status, sizeof(int32_t)));
    PROBE_CHECK(cuda, cudaMemsetAsync(status, 0, sizeof(int32_t), cl->stream));
    for (int i = 0; i < 2; i++)
        PROBE_CHECK(cuda, mok_fill_uniform_bf16(src + i * n2, n2, PROBE_SEED, 0x300u + (unsigned)i, 1.0f,
                                                (mok_stream_t)cl->stream));
    float *a_scale = scale, *w_scale = scale + n2 / 128, *ones = scale + n2 / 128 + nb * nb;
    PROBE_CHECK(cuda, mok_quant_fp8_block_bf16(src, GEMM_N, GEMM_N, q, a_scale, status, (mok_stream_t)cl->stream));
    PROBE_CHECK(cuda, mok_quant_fp8_block_weights_bf16(src + n2, 1, GEMM_N, GEMM_N, q + n2, w_scale, status,
                                                       (mok_stream_t)cl->stream));
    if (mok_lt_fp8_create(&lt, 32u << 20, err, err_len) ||
        mok_lt_fp8_reserve(lt, GEMM_N, GEMM_N, GEMM_N, err, err_len) ||
        mok_lt_fp8_prepare_weight_scales(cl->stream, 1, GEMM_N, GEMM_N, w_scale, w_lt, err, err_len)) {
        name_rank(err, err_len, cl->rank);
        goto fail;
    }
    const float one_pair[8] = {1.0f, 0, 0, 0, 1.0f, 0, 0, 0}; /* each scale on its own 16 bytes */
    PROBE_CHECK(cuda, cudaMemcpyAsync(ones, one_pair, sizeof one_pair, cudaMemcpyHostToDevice, cl->stream));
    PROBE_CHECK(cuda, cudaStreamSynchronize(cl->stream)); /* one_pair is the host stack's */
    struct fp8_gemm g = {lt, per_tensor, q, a_scale, w_lt, ones, c};
    rc = time_gemm_calls(cl, fp8_gemm_once, &g, ms, err, err_len);
fail:
    cudaDeviceSynchronize();
    if (lt)
        mok_lt_fp8_destroy(lt);
    cudaFree(src);
    cudaFree(c);
    cudaFree(q);
    cudaFree(scale);
    cudaFree(w_lt);
    cudaFree(status);
    return rc;
}

/* The DRAM read shapes the probe times; it keeps the fastest (kernels/util/probe.cu says why more than one). */
static const struct read_shape {
    const char *name; /* as printed and in the report's JSON */
    int bulk;         /* 0: plain loads, PROBE_BLOCKS_PER_SM x PROBE_THREADS per SM; 1: bulk copies */
    int per_sm;       /* bulk: blocks per SM */
    int chunk, stages;
} read_shapes[MOK_PROBE_READ_SHAPES] = {
    {"loads", 0, 0, 0, 0},
    {"bulk 1x8x16KiB", 1, 1, 16 << 10, 8},
    {"bulk 2x4x16KiB", 1, 2, 16 << 10, 4},
};

/* Per-rank times (ms) of READ_ITERS reads of READ_BYTES of this GPU's memory in each shape, after one untimed read
 * per shape. Local. */
static int time_read(struct mok_cluster *cl, const struct mok_probe *pr, double ms[][READ_ITERS], char *err,
                     int err_len)
{
    uint8_t *buf = NULL;
    uint32_t *sink = NULL;
    int *timed_out = NULL, lost = 0;
    cudaEvent_t ev[2] = {NULL, NULL};
    int rc = -1, sms = pr->blocks / PROBE_BLOCKS_PER_SM;
    PROBE_CHECK(cuda, cudaMalloc((void **)&buf, READ_BYTES));
    PROBE_CHECK(cuda, cudaMalloc((void **)&sink, sizeof(uint32_t)));
    PROBE_CHECK(cuda, cudaMalloc((void **)&timed_out, sizeof(int)));
    PROBE_CHECK(cuda, cudaMemsetAsync(timed_out, 0, sizeof(int), cl->stream));
    PROBE_CHECK(cuda, cudaMemsetAsync(buf, 0x5a, READ_BYTES, cl->stream)); /* touched: every page is mapped */
    PROBE_CHECK(cuda, cudaEventCreate(&ev[0]));
    PROBE_CHECK(cuda, cudaEventCreate(&ev[1]));
    for (int sh = 0; sh < MOK_PROBE_READ_SHAPES; sh++) {
        const struct read_shape *r = &read_shapes[sh];
        for (int it = -1; it < READ_ITERS; it++) {
            PROBE_CHECK(cuda, cudaEventRecord(ev[0], cl->stream));
            if (r->bulk)
                PROBE_CHECK(cuda, mok_probe_read_bulk(buf, READ_BYTES, sms * r->per_sm, r->chunk, r->stages, timed_out,
                                                      (mok_stream_t)cl->stream));
            else
                PROBE_CHECK(cuda,
                            mok_probe_read(buf, READ_BYTES, pr->blocks, pr->threads, sink, (mok_stream_t)cl->stream));
            PROBE_CHECK(cuda, cudaEventRecord(ev[1], cl->stream));
            PROBE_CHECK(cuda, cudaEventSynchronize(ev[1]));
            float t = 0;
            PROBE_CHECK(cuda, cudaEventElapsedTime(&t, ev[0], ev[1]));
            if (it >= 0)
                ms[sh][it] = t;
        }
    }
    PROBE_CHECK(cuda, cudaMemcpy(&lost, timed_out, sizeof lost, cudaMemcpyDeviceToHost));
    if (lost)
        PROBE_FAIL("rank %d: DRAM read probe: block %d of a bulk read waited over 4 s for a chunk", cl->rank,
                   lost - 1);
    rc = 0;
fail:
    for (int i = 0; i < 2; i++)
        if (ev[i])
            cudaEventDestroy(ev[i]);
    cudaFree(buf);
    cudaFree(sink);
    cudaFree(timed_out);
    return rc;
}

int mok_probe_run(struct mok_cluster *cl, struct mok_probe *out, char *err, int err_len)
{
    cudaEvent_t ev[2] = {NULL, NULL};
    double gemm_ms[GEMM_ITERS] = {0}, read_ms[MOK_PROBE_READ_SHAPES][READ_ITERS] = {{0}};
    int fail = 1, sms = 0, lsa_min = cl->lsa_size;
    err[0] = '\0';
    memset(out, 0, sizeof(*out));
    out->push_gbps = out->pull_gbps = out->bidir_push_gbps = out->gemm_bf16_tflops = out->dram_read_gbps = NAN;
    for (int sh = 0; sh < MOK_PROBE_READ_SHAPES; sh++)
        out->dram_shape_gbps[sh] = NAN;
    out->dram_read_shape = "none";
    out->gemm_fp8_block_tflops = out->gemm_fp8_tensor_tflops = NAN;
    out->threads = PROBE_THREADS;
    out->bytes = (double)PROBE_BYTES;

    PROBE_CHECK(cuda, cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, cl->device));
    out->blocks = sms * PROBE_BLOCKS_PER_SM;
    PROBE_CHECK(cuda, cudaEventCreate(&ev[0]));
    PROBE_CHECK(cuda, cudaEventCreate(&ev[1]));
    fail = 0;
fail:
    /* the smallest LSA team decides for everyone, so every rank takes the same collective path */
    MPI_Allreduce(MPI_IN_PLACE, &lsa_min, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!any_failed(fail) && lsa_min >= 2)
        probe_links(cl, out, ev, &fail, err, err_len);
    fail = any_failed(fail);
    /* DRAM before the GEMMs: read after them (held at the power cap), three of eight probes on one H100 read
     * 2.79-2.98 TB/s and the other five 3.20-3.21, minutes apart, plain loads 2.73-2.94 in all eight
     * (results/h100x1/2026-12-06-probe-shapes); read first, ten of ten on three H100s read 3.20-3.22, plain loads
     * 3.17-3.19 (results/h100x1/2026-12-06-fp8-push-all). */
    if (!fail) { /* a GPU without 4 GiB free gets no DRAM figure (the rooflines stay empty), not a failed probe */
        char read_err[256];
        int read_fail = time_read(cl, out, read_ms, read_err, (int)sizeof read_err);
        if (read_fail)
            cudaGetLastError();
        if (!any_failed(read_fail)) {
            for (int sh = 0; sh < MOK_PROBE_READ_SHAPES; sh++) {
                out->dram_shape_gbps[sh] = (double)READ_BYTES / (median_of_max(read_ms[sh], READ_ITERS) * 1e-3) / 1e9;
                if (!(out->dram_read_gbps >= out->dram_shape_gbps[sh])) { /* the first, or a faster one */
                    out->dram_read_gbps = out->dram_shape_gbps[sh];
                    out->dram_read_shape = read_shapes[sh].name;
                }
            }
        } else if (cl->rank == 0)
            fprintf(stderr, "mok-bench: --probe: no DRAM read figure (%s)\n", read_fail ? read_err : "another rank");
    }
    if (!fail)
        fail = time_gemm(cl, gemm_ms, err, err_len);
    if (!any_failed(fail))
        out->gemm_bf16_tflops = 2.0 * GEMM_N * GEMM_N * (double)GEMM_N / (median_of_max(gemm_ms, GEMM_ITERS) * 1e-3)
                                / 1e12;
    else
        fail = 1;
    for (int tensor = 0; tensor < 2 && !fail; tensor++) { /* no FP8 figure (a GPU without Hopper's block-scaled
                                                             cuBLASLt) leaves the fp8 rooflines empty */
        char fp8_err[512];
        double fp8_ms[GEMM_ITERS] = {0};
        int fp8_fail = time_gemm_fp8(cl, tensor == 1, fp8_ms, fp8_err, (int)sizeof fp8_err);
        if (fp8_fail)
            cudaGetLastError();
        double tflops = 2.0 * GEMM_N * GEMM_N * (double)GEMM_N / (median_of_max(fp8_ms, GEMM_ITERS) * 1e-3) / 1e12;
        if (!any_failed(fp8_fail))
            *(tensor ? &out->gemm_fp8_tensor_tflops : &out->gemm_fp8_block_tflops) = tflops;
        else if (cl->rank == 0)
            fprintf(stderr, "mok-bench: --probe: no %s FP8 GEMM figure (%s)\n", tensor ? "per-tensor" : "fp8_block",
                    fp8_fail ? fp8_err : "another rank");
    }
    for (int i = 0; i < 2; i++)
        if (ev[i])
            cudaEventDestroy(ev[i]);
    if (fail && !err[0])
        snprintf(err, (size_t)err_len, "rank %d: probe stopped: another rank failed", cl->rank);
    return fail ? -1 : 0;
}

void mok_probe_print(FILE *out, const struct mok_probe *p)
{
    if (isnan(p->push_gbps))
        fprintf(out, "# probe: peer bandwidth n/a (no peer GPU in the LSA team)");
    else
        fprintf(out,
                "# probe: push %.0f GB/s, pull %.0f GB/s, both directions %.0f GB/s per direction (%g GiB, %d blocks x "
                "%d threads)",
                p->push_gbps, p->pull_gbps, p->bidir_push_gbps, p->bytes / (double)(1u << 30), p->blocks, p->threads);
    fprintf(out, "; dense bf16 GEMM %d^3 %.0f TFLOP/s (cuBLAS, after %.0f ms at load: at the power cap); FP8 "
                 "(cuBLASLt) %.0f block-scaled, %.0f per-tensor; DRAM read %.0f GB/s (%g GiB; the best of",
            GEMM_N, p->gemm_bf16_tflops, GEMM_WARMUP_MS, p->gemm_fp8_block_tflops, p->gemm_fp8_tensor_tflops,
            p->dram_read_gbps, (double)READ_BYTES / (double)(1u << 30));
    for (int sh = 0; sh < MOK_PROBE_READ_SHAPES; sh++)
        fprintf(out, "%s %s %.0f", sh ? "," : "", read_shapes[sh].name, p->dram_shape_gbps[sh]);
    fprintf(out, ")\n");
}
