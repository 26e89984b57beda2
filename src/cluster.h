/* cluster: MPI ranks, one GPU each, an NCCL communicator, symmetric memory and the environment facts every
 * report carries. Errors are return codes with a message; only main exits. */
#ifndef MOK_CLUSTER_H
#define MOK_CLUSTER_H

#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>
#include <stdbool.h>
#include <stddef.h>

#include "report.h"

struct mok_cluster {
    int rank, nranks;
    int local_rank, local_size; /* within the host (MPI_COMM_TYPE_SHARED) */
    int device;                 /* -1 until mok_cluster_init_gpu */
    MPI_Comm local_comm;
    ncclComm_t nccl;
    int lsa_size;
    cudaStream_t stream;
    struct mok_env env;
};

struct mok_symmem {
    void *ptr;
    size_t bytes;
    ncclWindow_t window;
};

/* MPI_Init and rank facts; no GPU touched (so --dry-run works anywhere). */
int mok_cluster_init_mpi(int *argc, char ***argv, struct mok_cluster *cl);
/* Counts local GPUs (0 when there is no driver or device). */
int mok_cluster_gpu_count(void);
/* Local rank -> GPU (error when more local ranks than GPUs), NCCL communicator from a unique id broadcast over
 * MPI, LSA team size, a stream, and env (versions, one mok_rank_info per rank gathered on every rank). */
int mok_cluster_init_gpu(struct mok_cluster *cl, char *err, int err_len);
/* Fills env without a GPU (versions, hosts); used by --dry-run. */
void mok_cluster_describe_cpu(struct mok_cluster *cl);
void mok_cluster_finalize(struct mok_cluster *cl);

/* Collective over all ranks: ncclMemAlloc + ncclCommWindowRegister(NCCL_WIN_COLL_SYMMETRIC). bytes must be
 * the same on every rank. */
int mok_symmem_alloc(struct mok_cluster *cl, size_t bytes, struct mok_symmem *out, char *err, int err_len);
void mok_symmem_free(struct mok_cluster *cl, struct mok_symmem *m);

/* Max of a value over ranks (MPI_Allreduce), for capacities and byte counts. */
long long mok_allreduce_max_ll(long long v);

#endif
