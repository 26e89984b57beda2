/* gemm/fp8_rega.h: the K order of fp8_block's weights under fp8_rega (gemm/sm90_fp8_rega.cuh: the consumers load A's
 * e4m3 fragment into registers, 16 bytes at a time). Plain C, included by the kernels and by the host test
 * (tests/test_fp8.c checks it is a permutation that puts every code where the register fragment wants it).
 *
 * wgmma's register A for e4m3 (mma.m16n8k32's fragment): per k32 step s, thread q = lane % 4 holds of each of its two
 * rows the four codes K 32 s + 4 q .. + 3 (word hh = 0) and 32 s + 16 + 4 q .. + 3 (hh = 1). The thread reads bytes
 * [32 q, + 32) of its row, word 2 s + hh of them standing for those K. So the code of natural K n = 32 q + 8 s + 4 hh
 * + j (j = 0..3) has to meet the weight stored at 32 s + 16 hh + 4 q + j: the weights' K is permuted within each
 * 128-K block (one order of K for both operands gives the same dot product, and a 128-K block keeps its scale). */
#ifndef MOK_GEMM_FP8_REGA_H
#define MOK_GEMM_FP8_REGA_H

#ifdef __CUDACC__
#define MOK_FP8_REGA_HD __host__ __device__
#else
#define MOK_FP8_REGA_HD
#endif

/* Where natural K n (0..127) of a 128-K block sits in fp8_rega's weight rows. */
static inline MOK_FP8_REGA_HD int mok_fp8_rega_pos(int n)
{
    const int q = n >> 5, s = (n >> 3) & 3, hh = (n >> 2) & 1, j = n & 3;
    return 32 * s + 16 * hh + 4 * q + j;
}

#endif
