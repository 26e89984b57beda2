/* gemm/sm90_tensor_maps: the TMA tensor maps of the SM90 kernels (sm90_core.cuh declares them: the grouped GEMM,
 * the weight-gradient kernel and the megakernels encode their operands here), over bf16, e4m3 and fp32 matrices
 * and mxfp8's B-scale tiles. The encoder is fetched through the runtime (no -lcuda). */
#include <cuda.h> /* CUtensorMap and its enums only */
#include <cudaTypedefs.h>
#include <stdio.h>

#include "common/common.cuh"
#include "gemm/sm90_core.cuh"
#include "gemm/sm90_mx_expand.cuh"

namespace {

using namespace mok_sm90;

PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder()
{
    static PFN_cuTensorMapEncodeTiled_v12000 fn = nullptr; /* a benign race: every caller stores the same */
    if (!fn) {
        void *p = nullptr;
        cudaDriverEntryPointQueryResult q;
        if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &q) !=
                cudaSuccess ||
            q != cudaDriverEntryPointSuccess || !p) {
            cudaGetLastError();
            return nullptr;
        }
        fn = reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(p);
    }
    return fn;
}

/* A row-major bf16 matrix [rows][k] read in boxes of box_rows x 64 (128 bytes of K), 128B swizzle: the layout
 * mok_wgmma_desc_sw128 describes. Rows outside [0, rows) read as zeros. land (e4m3 only): mxfp8 scheme (b)'s landing
 * boxes instead, 64 bytes of K per row, 64B swizzle (sm90_mx_expand.cuh). */
bool encode_map(CUtensorMap *map, const void *base, uint64_t rows, uint64_t k, uint32_t box_rows, bool e4m3 = false,
                uint64_t row_bytes = 0, bool land = false)
{
    PFN_cuTensorMapEncodeTiled_v12000 encode = tensor_map_encoder();
    if (!encode)
        return false;
    /* e4m3: one byte per element, so a 128-byte box row is 128 of them (the tensor map has no fp8 type; bytes) */
    const uint64_t elem = e4m3 ? 1 : 2;
    cuuint64_t dims[2] = {k, rows};
    cuuint64_t strides[1] = {row_bytes ? row_bytes : k * elem}; /* bytes between rows; the innermost is implied */
    cuuint32_t box[2] = {(cuuint32_t)((land ? kMxLandRowBytes : kRowBytes) / elem), box_rows};
    cuuint32_t elem_strides[2] = {1, 1};
    CUresult r = encode(map, e4m3 ? CU_TENSOR_MAP_DATA_TYPE_UINT8 : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2,
                        const_cast<void *>(base), dims, strides, box, elem_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
                        land ? CU_TENSOR_MAP_SWIZZLE_64B : CU_TENSOR_MAP_SWIZZLE_128B,
                        CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (r != CUDA_SUCCESS) {
        fprintf(stderr, "mok-bench: gemm_sm90: cuTensorMapEncodeTiled failed (CUresult %d) for [%llu][%llu], box %u\n",
                (int)r, (unsigned long long)rows, (unsigned long long)k, box_rows);
        return false;
    }
    return true;
}

/* mxfp8's B scales in the GEMM's tile layout (mok_scale_mx_tiles): [blocks][k_blocks x 256] bytes, a block being 64
 * B rows, read in boxes of one k block of two adjacent blocks (2 x 256 bytes, no swizzle: the consumers index it
 * themselves); scheme (b): boxes of one 64-K block's 128 bytes of box_blocks adjacent blocks (its producer indexes
 * them). */
bool encode_mx_scale_map(CUtensorMap *map, const void *base, uint64_t blocks, uint64_t k_blocks,
                         uint32_t box_bytes = kMxScaleSlot / 2, uint32_t box_blocks = 2)
{
    PFN_cuTensorMapEncodeTiled_v12000 encode = tensor_map_encoder();
    if (!encode)
        return false;
    cuuint64_t dims[2] = {k_blocks * kMxScaleSlot / 2, blocks};
    cuuint64_t strides[1] = {k_blocks * kMxScaleSlot / 2};
    cuuint32_t box[2] = {box_bytes, box_blocks};
    cuuint32_t elem_strides[2] = {1, 1};
    CUresult r = encode(map, CU_TENSOR_MAP_DATA_TYPE_UINT8, 2, const_cast<void *>(base), dims, strides, box,
                        elem_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE,
                        CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (r != CUDA_SUCCESS) {
        fprintf(stderr, "mok-bench: gemm_sm90: cuTensorMapEncodeTiled failed (CUresult %d) for the mxfp8 B scales "
                "[%llu][%llu]\n", (int)r, (unsigned long long)blocks, (unsigned long long)k_blocks);
        return false;
    }
    return true;
}

} // namespace

bool mok_sm90::encode_tile_map(CUtensorMap *map, const void *base, uint64_t rows, uint64_t k, uint32_t box_rows)
{
    return encode_map(map, base, rows, k, box_rows);
}

bool mok_sm90::encode_tile_map_f32(CUtensorMap *map, float *base, uint64_t rows, uint64_t cols, uint32_t box_rows)
{
    PFN_cuTensorMapEncodeTiled_v12000 encode = tensor_map_encoder();
    if (!encode)
        return false;
    cuuint64_t dims[2] = {cols, rows};
    cuuint64_t strides[1] = {cols * 4};
    cuuint32_t box[2] = {kRowBytes / 4, box_rows}; /* 32 floats: one 128-byte swizzle row */
    cuuint32_t elem_strides[2] = {1, 1};
    CUresult r = encode(map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 2, base, dims, strides, box, elem_strides,
                        CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                        CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (r != CUDA_SUCCESS) {
        fprintf(stderr, "mok-bench: gemm_sm90: cuTensorMapEncodeTiled failed (CUresult %d) for fp32 [%llu][%llu]\n",
                (int)r, (unsigned long long)rows, (unsigned long long)cols);
        return false;
    }
    return true;
}

bool mok_sm90::encode_mx_scale_tile_map(CUtensorMap *map, const void *base, uint64_t blocks, uint64_t k_blocks,
                                        uint32_t land_blocks)
{
    return land_blocks ? encode_mx_scale_map(map, base, blocks, k_blocks, kMxLandScaleRow, land_blocks)
                       : encode_mx_scale_map(map, base, blocks, k_blocks);
}

bool mok_sm90::encode_tile_map_e4m3(CUtensorMap *map, const void *base, uint64_t rows, uint64_t k, uint32_t box_rows,
                                    uint64_t row_bytes, bool land)
{
    return encode_map(map, base, rows, k, box_rows, true, row_bytes, land);
}
