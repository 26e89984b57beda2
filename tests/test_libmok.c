/* test_libmok: include/libmok.h driven from a plain C program, as a framework would: MPI only to start the ranks
 * and share the NCCL id; then a workspace per tuning variant, random tokens, routing and weights, mok_route +
 * mok_forward, and y checked against a host fp32 reference with the layer's bf16 roundings (GEMM outputs and the
 * SwiGLU output rounded to bf16, fp32 accumulation, the weighted top-k sum in fp32). A second forward on the same
 * inputs must give bitwise the same y. Ranks hold different token counts. Exit 0 pass, 1 fail, 77 skip (no GPU, not sm_90, not one NVLink domain). */
#include <math.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "libmok.h"

#define H 256
#define I 128
#define E 8
#define K 2

static uint32_t lcg(uint32_t *s)
{
    *s = *s * 1664525u + 1013904223u;
    return *s >> 8;
}
static float uniform(uint32_t *s) { return (float)lcg(s) / (float)(1u << 24) * 2.0f - 1.0f; }

static uint16_t to_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    u += 0x7FFFu + ((u >> 16) & 1u); /* round to nearest even (no NaN inputs here) */
    return (uint16_t)(u >> 16);
}
static float from_bf16(uint16_t b)
{
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static float round_bf16(float f) { return from_bf16(to_bf16(f)); }

/* Expert e's weights, the same on every rank (each rank's reference needs every expert). */
static void make_weights(uint16_t *w13, uint16_t *w2)
{
    uint32_t s = 12345;
    for (size_t i = 0; i < (size_t)E * 2 * I * H; i++)
        w13[i] = to_bf16(uniform(&s) / sqrtf((float)H));
    for (size_t i = 0; i < (size_t)E * H * I; i++)
        w2[i] = to_bf16(uniform(&s) / sqrtf((float)I));
}

static void make_tokens(int rank, int T, uint16_t *x, int32_t *ids, float *w)
{
    uint32_t s = 777u + 31u * (uint32_t)rank;
    for (size_t i = 0; i < (size_t)T * H; i++)
        x[i] = to_bf16(uniform(&s));
    for (int t = 0; t < T; t++) {
        int a = (int)(lcg(&s) % E), b = (int)(lcg(&s) % (E - 1));
        ids[t * K] = a;
        ids[t * K + 1] = b >= a ? b + 1 : b; /* distinct */
        float u = uniform(&s), z = 1.0f + expf(u);
        w[t * K] = expf(u) / z;
        w[t * K + 1] = 1.0f / z;
    }
}

static void reference(int T, const uint16_t *x, const int32_t *ids, const float *w, const uint16_t *w13,
                      const uint16_t *w2, float *y)
{
    float g[2 * I], h[I];
    for (int t = 0; t < T; t++) {
        float acc_y[H] = {0};
        for (int j = 0; j < K; j++) {
            int e = ids[t * K + j];
            for (int n = 0; n < 2 * I; n++) {
                float a = 0;
                for (int c = 0; c < H; c++)
                    a += from_bf16(x[(size_t)t * H + c]) * from_bf16(w13[((size_t)e * 2 * I + n) * H + c]);
                g[n] = round_bf16(a);
            }
            for (int n = 0; n < I; n++)
                h[n] = round_bf16(g[n] / (1.0f + expf(-g[n])) * g[I + n]);
            for (int n = 0; n < H; n++) {
                float a = 0;
                for (int c = 0; c < I; c++)
                    a += h[c] * from_bf16(w2[((size_t)e * H + n) * I + c]);
                acc_y[n] += w[t * K + j] * round_bf16(a);
            }
        }
        for (int n = 0; n < H; n++)
            y[(size_t)t * H + n] = acc_y[n];
    }
}

#define CK(cond, ...)                                                                                            \
    do {                                                                                                         \
        if (!(cond)) {                                                                                           \
            fprintf(stderr, "rank %d: ", rank);                                                                  \
            fprintf(stderr, __VA_ARGS__);                                                                        \
            fprintf(stderr, "\n");                                                                               \
            failures++;                                                                                          \
            goto next;                                                                                           \
        }                                                                                                        \
    } while (0)

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank = 0, nranks = 1, ngpu = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    if (cudaGetDeviceCount(&ngpu) != cudaSuccess || ngpu < 1) {
        if (rank == 0)
            printf("SKIP: no GPU\n");
        MPI_Finalize();
        return 77;
    }
    cudaSetDevice(rank % ngpu);
    struct cudaDeviceProp prop;
    cudaGetDeviceProperties(&prop, rank % ngpu);
    if (prop.major != 9 || E % nranks) {
        if (rank == 0)
            printf("SKIP: libmok runs on sm_90 with the experts divisible by the ranks (sm_%d%d, %d ranks)\n",
                   prop.major, prop.minor, nranks);
        MPI_Finalize();
        return 77;
    }
    ncclUniqueId id;
    if (rank == 0)
        ncclGetUniqueId(&id);
    MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
    ncclComm_t comm;
    if (ncclCommInitRank(&comm, nranks, id, rank) != ncclSuccess) {
        fprintf(stderr, "rank %d: ncclCommInitRank failed\n", rank);
        return 1;
    }
    cudaStream_t st;
    cudaStreamCreate(&st);

    /* ragged: every rank but the first holds fewer tokens than max_tokens */
    const int T_MAX = 300, T = rank == 0 ? T_MAX : 123, EL = E / nranks;
    uint16_t *w13 = malloc(sizeof(uint16_t) * E * 2 * I * H), *w2 = malloc(sizeof(uint16_t) * E * H * I);
    uint16_t *x = malloc(sizeof(uint16_t) * T * H), *y = malloc(sizeof(uint16_t) * T * H);
    uint16_t *y2 = malloc(sizeof(uint16_t) * T * H);
    int32_t *ids = malloc(sizeof(int32_t) * T * K);
    float *w = malloc(sizeof(float) * T * K), *ref = malloc(sizeof(float) * T * H);
    make_weights(w13, w2);
    make_tokens(rank, T, x, ids, w);
    reference(T, x, ids, w, w13, w2, ref);
    uint16_t *d_w13, *d_w2, *d_y;
    int32_t *d_ids;
    float *d_w;
    cudaMalloc((void **)&d_w13, sizeof(uint16_t) * EL * 2 * I * H);
    cudaMalloc((void **)&d_w2, sizeof(uint16_t) * EL * H * I);
    cudaMalloc((void **)&d_y, sizeof(uint16_t) * T * H);
    cudaMalloc((void **)&d_ids, sizeof(int32_t) * T * K);
    cudaMalloc((void **)&d_w, sizeof(float) * T * K);
    cudaMemcpy(d_w13, w13 + (size_t)rank * EL * 2 * I * H, sizeof(uint16_t) * EL * 2 * I * H, cudaMemcpyHostToDevice);
    cudaMemcpy(d_w2, w2 + (size_t)rank * EL * H * I, sizeof(uint16_t) * EL * H * I, cudaMemcpyHostToDevice);
    cudaMemcpy(d_ids, ids, sizeof(int32_t) * T * K, cudaMemcpyHostToDevice);
    cudaMemcpy(d_w, w, sizeof(float) * T * K, cudaMemcpyHostToDevice);

    int failures = 0;
    char err[512];
    /* comm SMs, per-rank combine, dispatch push */
    const int variants[][3] = {{4, 0, 0}, {4, 1, 0}, {2, 0, 1}, {2, 1, 1}};
    for (int v = 0; v < 4; v++) {
        struct mok_layer_desc d = {.hidden = H, .intermediate = I, .experts = E, .topk = K, .max_tokens = T_MAX,
                                   .capacity_factor = 4.0, .input_slots = 1, .comm_sms = variants[v][0],
                                   .combine_per_rank = variants[v][1], .chunk_rows = 7,
                                   .dispatch_push = variants[v][2]};
        mok_workspace *ws = NULL;
        int rc = mok_workspace_create(comm, &d, st, &ws, err, sizeof err);
        if (rc) {
            fprintf(stderr, "rank %d: create (variant %d): %s: %s\n", rank, v, mok_status_string(rc), err);
            failures++;
            break; /* the other ranks may be waiting in a collective: stop here */
        }
        cudaMemcpy(mok_workspace_input(ws, 0), x, sizeof(uint16_t) * T * H, cudaMemcpyHostToDevice);
        for (int pass = 0; pass < 2; pass++) {
            cudaMemsetAsync(d_y, 0xFF, sizeof(uint16_t) * T * H, st); /* poison: NaN */
            rc = mok_route(ws, 0, T, d_ids, d_w, st, err, sizeof err);
            if (!rc)
                rc = mok_forward(ws, d_w13, d_w2, d_y, st, err, sizeof err);
            if (!rc)
                rc = mok_workspace_check(ws, st, err, sizeof err);
            CK(rc == MOK_OK, "variant %d pass %d: %s: %s", v, pass, mok_status_string(rc), err);
            cudaMemcpy(pass ? y2 : y, d_y, sizeof(uint16_t) * T * H, cudaMemcpyDeviceToHost);
        }
        {
            double maxref = 0, maxerr = 0;
            for (size_t i = 0; i < (size_t)T * H; i++) {
                maxref = fmax(maxref, fabs(ref[i]));
                float got = from_bf16(y[i]);
                maxerr = isnan(got) ? INFINITY : fmax(maxerr, fabs(got - ref[i]));
            }
            CK(maxerr <= 1e-2 * maxref, "variant %d: max error %.3e of max|ref| %.3e", v, maxerr, maxref);
            CK(!memcmp(y, y2, sizeof(uint16_t) * T * H), "variant %d: two forwards differ", v);
            if (rank == 0)
                printf("ok   variant %d (comm_sms %d, per_rank %d, push %d): max err %.2e of max|ref|, bitwise "
                       "repeatable\n", v, variants[v][0], variants[v][1], variants[v][2], maxerr / maxref);
        }
    next:
        mok_workspace_destroy(ws);
    }
    int total = 0;
    MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0)
        printf("test_libmok: %s (%d failures over %d ranks)\n", total ? "FAILED" : "all passed", total, nranks);
    ncclCommDestroy(comm);
    MPI_Finalize();
    return total ? 1 : 0;
}
