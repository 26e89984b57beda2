/* probe: `mok-bench --probe` measures, on the machine at hand and in the same run as the benchmarks, the
 * ceilings report fractions are computed against: peer bandwidth through NVLink with every SM (stores to the
 * peer, loads from the peer, and stores both ways at once), the dense bf16 GEMM rate of cuBLAS held at the power
 * cap, and the DRAM read bandwidth (the rooflines of the report rows: report.h). */
#ifndef MOK_PROBE_H
#define MOK_PROBE_H

#include <stdio.h>

#include "cluster.h"
#include "mok_kernels.h"

#define MOK_PROBE_READ_SHAPES 3 /* DRAM read shapes timed: plain loads, two bulk-copy layouts (src/probe.c) */

struct mok_probe {
    double push_gbps, pull_gbps, bidir_push_gbps; /* per direction, GB/s = 1e9 B/s, all SMs, 1 GiB; NAN when
                                                     the LSA team has fewer than 2 GPUs */
    double gemm_bf16_tflops;                       /* cuBLAS 8192^3 bf16, held at the power cap (>= 300 ms warm) */
    double gemm_fp8_block_tflops;                  /* cuBLASLt 8192^3 fp8_block, the same way; NAN if unavailable */
    double gemm_fp8_tensor_tflops;                 /* the same e4m3 GEMM with one scale per tensor (SCALAR_32F) */
    double dram_read_gbps;                         /* this GPU's DRAM read bandwidth, 4 GiB read, GB/s: the
                                                      fastest of the shapes below */
    const char *dram_read_shape;                   /* which one ("loads", "bulk ..."; "none" without a figure) */
    double dram_shape_gbps[MOK_PROBE_READ_SHAPES]; /* each shape's figure, GB/s */
    int blocks, threads;                           /* launch used for the copies */
    double bytes;                                  /* bytes per copy */
};

/* Collective over all ranks (uses the NCCL communicator for a symmetric window). Fills *out; every rank gets the
 * max over ranks of each time (so min bandwidth). Returns 0 or -1 with a message in err. */
int mok_probe_run(struct mok_cluster *cl, struct mok_probe *out, char *err, int err_len);
/* One '#' line for the report header: "# probe: push %.0f GB/s, pull %.0f GB/s, both directions %.0f GB/s per
 * direction (1 GiB, %d blocks x %d threads); dense bf16 GEMM 8192^3 %.0f TFLOP/s (cuBLAS, at the power cap); DRAM
 * read %.0f GB/s (the best of: each shape's figure)". */
void mok_probe_print(FILE *out, const struct mok_probe *p);

#endif
