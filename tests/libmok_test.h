/* libmok_test: what the libmok GPU tests (test_libmok.c, test_libmok_bwd.c, test_libmok_fp8.c) share: their seeded
 * host generator and bf16 rounding (tests/seeded.h) and their start. */
#ifndef MOK_TESTS_LIBMOK_TEST_H
#define MOK_TESTS_LIBMOK_TEST_H

#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>
#include <stdint.h>
#include <stdio.h>

#include "seeded.h"

/* Fails the calling check (returns 1) with the rank and a message, where a `t` with a `rank` is in scope. */
#define CK(cond, ...)                                                                                            \
    do {                                                                                                         \
        if (!(cond)) {                                                                                           \
            fprintf(stderr, "rank %d: ", t->rank);                                                               \
            fprintf(stderr, __VA_ARGS__);                                                                        \
            fprintf(stderr, "\n");                                                                               \
            return 1;                                                                                            \
        }                                                                                                        \
    } while (0)

/* MPI, one GPU per rank, the skip where libmok cannot run (no GPU; not sm_90; experts not divisible by the ranks),
 * the NCCL communicator. Returns 0 with *comm ready, 77 (skip; MPI finalized) or 1 (NCCL failed). */
static int libmok_start(int *argc, char ***argv, int experts, int *rank, int *nranks, ncclComm_t *comm)
{
    MPI_Init(argc, argv);
    int ngpu = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, rank);
    MPI_Comm_size(MPI_COMM_WORLD, nranks);
    if (cudaGetDeviceCount(&ngpu) != cudaSuccess || ngpu < 1) {
        if (*rank == 0)
            printf("SKIP: no GPU\n");
        MPI_Finalize();
        return 77;
    }
    cudaSetDevice(*rank % ngpu);
    struct cudaDeviceProp prop;
    cudaGetDeviceProperties(&prop, *rank % ngpu);
    if (prop.major != 9 || experts % *nranks) {
        if (*rank == 0)
            printf("SKIP: libmok runs on sm_90 with the experts divisible by the ranks (sm_%d%d, %d ranks)\n",
                   prop.major, prop.minor, *nranks);
        MPI_Finalize();
        return 77;
    }
    ncclUniqueId id;
    if (*rank == 0)
        ncclGetUniqueId(&id);
    MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
    if (ncclCommInitRank(comm, *nranks, id, *rank) != ncclSuccess) {
        fprintf(stderr, "rank %d: ncclCommInitRank failed\n", *rank);
        return 1;
    }
    return 0;
}

#endif
