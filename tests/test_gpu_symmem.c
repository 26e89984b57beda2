/* test_gpu_symmem: the symmetric-memory helper end to end. Every rank allocates a window (ncclMemAlloc +
 * ncclCommWindowRegister), creates a device communicator, and writes a rank-specific pattern into the next LSA
 * peer's window through ncclGetLsaPointer; after a barrier each rank checks what its predecessor wrote. */
#include <stdio.h>
#include <stdlib.h>

#include "cluster.h"
#include "mok_kernels.h"
#include "testing/mok_test_kernels.h"

#define N_WORDS (1u << 20) /* 4 MiB */

int main(int argc, char **argv)
{
    struct mok_cluster cl;
    char err[512];
    if (mok_cluster_init_mpi(&argc, &argv, &cl) || mok_cluster_init_gpu(&cl, err, sizeof(err))) {
        fprintf(stderr, "test_gpu_symmem: init: %s\n", err);
        return 1;
    }
    int failures = 0;
    if (cl.lsa_size != cl.nranks) {
        if (cl.rank == 0)
            printf("SKIP: LSA team (%d) is not all %d ranks; test needs one NVLink domain\n", cl.lsa_size, cl.nranks);
        mok_cluster_finalize(&cl);
        return 77;
    }
    struct mok_symmem win;
    void *devcomm = NULL;
    if (mok_symmem_alloc(&cl, N_WORDS * 4 + 4096, &win, err, sizeof(err))) {
        fprintf(stderr, "test_gpu_symmem: %s\n", err);
        return 1;
    }
    int rc = mok_devcomm_create(cl.nccl, 1, &devcomm);
    if (rc) {
        fprintf(stderr, "test_gpu_symmem: ncclDevCommCreate: %d\n", rc);
        return 1;
    }
    cudaMemsetAsync(win.ptr, 0xFF, N_WORDS * 4 + 4096, cl.stream);
    cudaStreamSynchronize(cl.stream);
    MPI_Barrier(MPI_COMM_WORLD); /* every window cleared before anyone writes into it */
    int peer = (cl.rank + 1) % cl.nranks, from = (cl.rank + cl.nranks - 1) % cl.nranks;
    uint32_t value = 0x1000000u * (uint32_t)(cl.rank + 1);
    rc = mok_lsa_write_peer(win.window, 4096, peer, value, N_WORDS, (mok_stream_t)cl.stream);
    if (rc || cudaStreamSynchronize(cl.stream) != cudaSuccess) {
        fprintf(stderr, "test_gpu_symmem: rank %d: write to peer %d failed: %s\n", cl.rank, peer,
                cudaGetErrorString(cudaGetLastError()));
        return 1;
    }
    MPI_Barrier(MPI_COMM_WORLD);
    uint32_t *host = malloc(N_WORDS * 4 + 4096);
    cudaMemcpy(host, win.ptr, N_WORDS * 4 + 4096, cudaMemcpyDeviceToHost);
    uint32_t expect_base = 0x1000000u * (uint32_t)(from + 1);
    for (uint32_t i = 0; i < 1024; i++) /* the first 4 KiB (before the offset) stay untouched */
        if (host[i] != 0xFFFFFFFFu && failures++ < 5)
            printf("rank %d: word %u before the offset was overwritten: %08x\n", cl.rank, i, host[i]);
    for (uint32_t i = 0; i < N_WORDS; i++)
        if (host[1024 + i] != expect_base + i && failures++ < 5)
            printf("rank %d: word %u = %08x, expected %08x from rank %d\n", cl.rank, i, host[1024 + i],
                   expect_base + i, from);
    free(host);
    int total = 0;
    MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (cl.rank == 0)
        printf("test_gpu_symmem: %d ranks, LSA size %d, %u words each through ncclGetLsaPointer: %s\n", cl.nranks,
               cl.lsa_size, N_WORDS, total ? "FAILED" : "passed");
    mok_devcomm_destroy(cl.nccl, devcomm);
    mok_symmem_free(&cl, &win);
    mok_cluster_finalize(&cl);
    return total ? 1 : 0;
}
