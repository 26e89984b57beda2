/* gemm_portable: the expert GEMM (kernels/mok_gemm.h) on mma.sync m16n8k16 bf16, for any sm_80+ GPU: the
 * Blackwell builds use it until a tcgen05 path can be measured, and a GPU test forces it on Hopper. Correct and
 * simple rather than fast: 64x64 output tiles, K in steps of 32 through shared memory, 4 warps of 32x32, the
 * accumulator tile staged through shared memory so the epilogue (SwiGLU, masking of rows past the group) is
 * plain per-element code. Persistent CTAs walk all groups' tiles; group sizes are read on the device. */
#include "common/common.cuh"
#include "mok_gemm.h"

#define PT_M 64
#define PT_N 64 /* B rows per tile: with SwiGLU 32 gate rows + 32 up rows -> 32 output columns */
#define PT_K 32
#define PT_THREADS 128
#define PT_MAX_GROUPS 1024

struct pt_smem {
    uint16_t a[PT_M][PT_K + 8]; /* +8: rows 80 bytes apart, fewer bank conflicts */
    uint16_t b[PT_N][PT_K + 8];
    float c[PT_M][PT_N + 4];
    int tile_start[PT_MAX_GROUPS + 1];
};

__device__ __forceinline__ uint32_t pt_pair(const uint16_t *p) { return *(const uint32_t *)p; }

/* D = A (16x16, row) * B (16x8, col) + D, bf16 in, fp32 out. */
__device__ __forceinline__ void pt_mma(float d[4], const uint32_t a[4], const uint32_t b[2])
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#elif defined(__CUDA_ARCH__)
    __trap(); /* built for a GPU without bf16 mma.sync: fail loudly rather than return zeros */
#endif
}

__global__ void __launch_bounds__(PT_THREADS) gemm_portable_kernel(mok_gemm_args g)
{
    extern __shared__ __align__(16) char smem_raw[];
    pt_smem &sm = *(pt_smem *)smem_raw;
    int out_cols = g.swiglu ? PT_N / 2 : PT_N; /* output columns per tile */
    int n_tiles = g.n_out / out_cols;
    if (threadIdx.x == 0) { /* tile prefix over groups: tiles of group i start at tile_start[i] */
        int t = 0;
        for (int i = 0; i < g.groups; i++) {
            sm.tile_start[i] = t;
            /* clamped to the buffers: an overflowing schedule (reported elsewhere) must not write past them */
            int lo = max(0, min(g.offset[i], g.rows_capacity)), hi = min(g.offset[i + 1], g.rows_capacity);
            int rows = hi > lo ? hi - lo : 0;
            t += (rows + PT_M - 1) / PT_M * n_tiles;
        }
        sm.tile_start[g.groups] = t;
    }
    __syncthreads();
    int total = sm.tile_start[g.groups];
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, gid = lane >> 2, tig = lane & 3;
    int wm = (warp >> 1) * 32, wn = (warp & 1) * 32; /* this warp's 32x32 part of the tile */
    size_t b_rows = (size_t)(g.swiglu ? 2 * g.n_out : g.n_out);
    for (int tile = blockIdx.x; tile < total; tile += gridDim.x) {
        int grp = 0, lo = 0, hi = g.groups - 1; /* last group whose start <= tile */
        while (lo <= hi) {
            int mid = (lo + hi) >> 1;
            if (sm.tile_start[mid] <= tile)
                grp = mid, lo = mid + 1;
            else
                hi = mid - 1;
        }
        int local = tile - sm.tile_start[grp], m_tile = local / n_tiles, n_tile = local % n_tiles;
        int row0 = max(0, min(g.offset[grp], g.rows_capacity)) + m_tile * PT_M,
            row_end = min(g.offset[grp + 1], g.rows_capacity);
        const uint16_t *bg = g.b + (size_t)grp * b_rows * g.k;
        float acc[2][4][4] = {};
        for (int k0 = 0; k0 < g.k; k0 += PT_K) {
            /* 64 rows x 32 bf16 = 4 x 16-byte vectors per row, for A and B */
            for (int i = threadIdx.x; i < PT_M * 4; i += PT_THREADS) {
                int r = i / 4, v = i % 4;
                uint4 val = make_uint4(0, 0, 0, 0);
                if (row0 + r < row_end) /* rows of the next group stay zero */
                    val = *(const uint4 *)(g.a + (size_t)(row0 + r) * g.k + k0 + v * 8);
                *(uint4 *)&sm.a[r][v * 8] = val;
                /* B row r: plain tile rows, or gate rows then up rows for SwiGLU */
                size_t br = g.swiglu ? (r < PT_N / 2 ? (size_t)n_tile * (PT_N / 2) + r
                                                     : (size_t)g.n_out + (size_t)n_tile * (PT_N / 2) + r - PT_N / 2)
                                     : (size_t)n_tile * PT_N + r;
                *(uint4 *)&sm.b[r][v * 8] = *(const uint4 *)(bg + br * g.k + k0 + v * 8);
            }
            __syncthreads();
#pragma unroll
            for (int kk = 0; kk < PT_K; kk += 16) {
                uint32_t af[2][4], bf[4][2];
#pragma unroll
                for (int mi = 0; mi < 2; mi++) {
                    int r = wm + mi * 16 + gid;
                    af[mi][0] = pt_pair(&sm.a[r][kk + 2 * tig]);
                    af[mi][1] = pt_pair(&sm.a[r + 8][kk + 2 * tig]);
                    af[mi][2] = pt_pair(&sm.a[r][kk + 8 + 2 * tig]);
                    af[mi][3] = pt_pair(&sm.a[r + 8][kk + 8 + 2 * tig]);
                }
#pragma unroll
                for (int ni = 0; ni < 4; ni++) {
                    int n = wn + ni * 8 + gid;
                    bf[ni][0] = pt_pair(&sm.b[n][kk + 2 * tig]);
                    bf[ni][1] = pt_pair(&sm.b[n][kk + 8 + 2 * tig]);
                }
#pragma unroll
                for (int mi = 0; mi < 2; mi++)
#pragma unroll
                    for (int ni = 0; ni < 4; ni++)
                        pt_mma(acc[mi][ni], af[mi], bf[ni]);
            }
            __syncthreads();
        }
        /* accumulators -> shared tile (each result rounded to bf16, as a bf16 GEMM output is) */
#pragma unroll
        for (int mi = 0; mi < 2; mi++)
#pragma unroll
            for (int ni = 0; ni < 4; ni++) {
                int r = wm + mi * 16 + gid, c = wn + ni * 8 + 2 * tig;
                sm.c[r][c] = mok_bf16_to_f32(mok_f32_to_bf16(acc[mi][ni][0]));
                sm.c[r][c + 1] = mok_bf16_to_f32(mok_f32_to_bf16(acc[mi][ni][1]));
                sm.c[r + 8][c] = mok_bf16_to_f32(mok_f32_to_bf16(acc[mi][ni][2]));
                sm.c[r + 8][c + 1] = mok_bf16_to_f32(mok_f32_to_bf16(acc[mi][ni][3]));
            }
        __syncthreads();
        for (int i = threadIdx.x; i < PT_M * out_cols; i += PT_THREADS) {
            int r = i / out_cols, c = i % out_cols;
            if (row0 + r >= row_end)
                continue;
            float v = sm.c[r][c];
            if (g.swiglu) {
                float up = sm.c[r][c + PT_N / 2];
                v = v / (1.0f + expf(-v)) * up;
            }
            g.c[(size_t)(row0 + r) * g.n_out + (size_t)n_tile * out_cols + c] = mok_f32_to_bf16(v);
        }
        __syncthreads();
    }
}

extern "C" int mok_gemm_portable(const struct mok_gemm_args *g, mok_stream_t stream)
{
    int out_cols = g->swiglu ? PT_N / 2 : PT_N;
    if (g->groups < 1 || g->groups > PT_MAX_GROUPS || g->k <= 0 || g->k % PT_K || g->n_out <= 0 ||
        g->n_out % out_cols || (((uintptr_t)g->a | (uintptr_t)g->b) & 15) || /* uint4 loads */
        g->ready || /* no ready-counter wait here: its rows must be complete at launch (stream order) */
        g->dtype != MOK_GEMM_BF16) /* bf16 only: FP8 runs on the sm_90a kernel */
        return (int)cudaErrorInvalidValue;
    int dev = 0, sms = 0;
    cudaGetDevice(&dev);
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
    size_t smem = sizeof(pt_smem);
    cudaFuncSetAttribute(gemm_portable_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
    gemm_portable_kernel<<<sms * 2, PT_THREADS, smem, mok_cuda_stream(stream)>>>(*g);
    return MOK_LAUNCH_RESULT();
}
