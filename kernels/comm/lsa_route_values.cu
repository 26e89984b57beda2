/* comm/lsa_route_values: per-slot values between an expert's slots and their routes' owners, on the schedule of
 * mok_lsa_schedule (kernels/mok_kernels.h): each slot's route weight gathered from every rank's weights, each
 * slot's value stored into its owner's window (the backward's router weights and d_router, lsa-layer's backward),
 * and each slot's row (the FP8 layers' h, exported for the check). */
#include <cuda_runtime.h>
#include <nccl.h>
#include <nccl_device.h>

#include "common/common.cuh"
#include "mok_kernels.h"

/* Each slot's route weight (0 for padding), from every rank's weights the schedule gathered: the backward's w. */
__global__ void lsa_slot_weights_kernel(mok_lsa_args a, float *w)
{
    const int used = min(a.offset[a.local_experts], a.capacity);
    for (int s = blockIdx.x * blockDim.x + threadIdx.x; s < a.capacity; s += gridDim.x * blockDim.x) {
        const int32_t e = s < used ? a.entry[s] : -1;
        w[s] = e < 0 ? 0.0f
                     : a.all_w[((size_t)((uint32_t)e >> 25) * a.t_max + ((e >> 5) & 0xFFFFF)) * a.topk + (e & 31)];
    }
}

extern "C" int mok_lsa_slot_weights(const struct mok_lsa_args *a, float *w, mok_stream_t stream)
{
    lsa_slot_weights_kernel<<<mok_blocks_for((size_t)a->capacity, 256, 1024), 256, 0, mok_cuda_stream(stream)>>>(*a,
                                                                                                                 w);
    return MOK_LAUNCH_RESULT();
}

/* Each slot's value v[slot] into its owner's window at off_dr + route (the backward's d_router), before the
 * combine whose done flag the owner waits for. */
__global__ void lsa_send_route_values_kernel(mok_lsa_args a, const float *v)
{
    const int used = min(a.offset[a.local_experts], a.capacity);
    for (int s = blockIdx.x * blockDim.x + threadIdx.x; s < used; s += gridDim.x * blockDim.x) {
        const int32_t e = a.entry[s];
        if (e < 0)
            continue;
        float *dr = (float *)ncclGetLsaPointer((ncclWindow_t)a.window, a.off_dr, (int)((uint32_t)e >> 25));
        dr[(size_t)((e >> 5) & 0xFFFFF) * a.topk + (e & 31)] = v[s];
    }
}

extern "C" int mok_lsa_send_route_values(const struct mok_lsa_args *a, const float *v, mok_stream_t stream)
{
    lsa_send_route_values_kernel<<<mok_blocks_for((size_t)a->capacity, 256, 1024), 256, 0,
                                   mok_cuda_stream(stream)>>>(*a, v);
    return MOK_LAUNCH_RESULT();
}


/* Each slot's row columns [col0, col0 + cols) into its owner's combine area, packed [t][k][cols]: a warp per slot,
 * 16-byte vectors where cols and col0 allow (multiples of 8), else elements. */
__global__ void lsa_send_route_rows_kernel(mok_lsa_args a, const uint16_t *rows, int row_elems, int col0, int cols)
{
    const int used = min(a.offset[a.local_experts], a.capacity), lane = threadIdx.x % 32;
    const bool vec = cols % 8 == 0 && col0 % 8 == 0 && row_elems % 8 == 0;
    for (int s = (blockIdx.x * blockDim.x + threadIdx.x) / 32; s < used; s += gridDim.x * blockDim.x / 32) {
        const int32_t e = a.entry[s];
        if (e < 0)
            continue;
        uint16_t *dst = (uint16_t *)ncclGetLsaPointer(
            (ncclWindow_t)a.window, a.off_comb + ((size_t)((e >> 5) & 0xFFFFF) * a.topk + (e & 31)) * cols * 2,
            (int)((uint32_t)e >> 25));
        const uint16_t *src = rows + (size_t)s * row_elems + col0;
        if (vec)
            for (int v = lane; v < cols / 8; v += 32)
                reinterpret_cast<uint4 *>(dst)[v] = reinterpret_cast<const uint4 *>(src)[v];
        else
            for (int i = lane; i < cols; i += 32)
                dst[i] = src[i];
    }
}

extern "C" int mok_lsa_send_route_rows(const struct mok_lsa_args *a, const uint16_t *rows, int row_elems, int col0,
                                       int cols, mok_stream_t stream)
{
    if (cols < 1 || cols > a->hidden || col0 < 0 || col0 + cols > row_elems)
        return (int)cudaErrorInvalidValue;
    lsa_send_route_rows_kernel<<<mok_blocks_for((size_t)a->capacity * 32, 256, 1024), 256, 0,
                                 mok_cuda_stream(stream)>>>(*a, rows, row_elems, col0, cols);
    return MOK_LAUNCH_RESULT();
}
