/* cluster: MPI bootstrap, GPU selection, NCCL communicator, symmetric windows, environment facts. */
#include "cluster.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "mok_build.h"
#include "mok_kernels.h"
#include "version.h"

/* Truncating copy (library version strings can be longer than our fields; a cut name is fine there). */
static void copy_str(char *dst, size_t len, const char *src)
{
    size_t n = src ? strlen(src) : 0;
    if (n >= len)
        n = len - 1;
    memcpy(dst, src ? src : "", n);
    dst[n] = '\0';
}

int mok_cluster_init_mpi(int *argc, char ***argv, struct mok_cluster *cl)
{
    memset(cl, 0, sizeof(*cl));
    cl->device = -1;
    if (MPI_Init(argc, argv) != MPI_SUCCESS)
        return -1;
    MPI_Comm_rank(MPI_COMM_WORLD, &cl->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &cl->nranks);
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, cl->rank, MPI_INFO_NULL, &cl->local_comm);
    MPI_Comm_rank(cl->local_comm, &cl->local_rank);
    MPI_Comm_size(cl->local_comm, &cl->local_size);
    return 0;
}

int mok_cluster_gpu_count(void)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        cudaGetLastError(); /* "no driver" is an answer here, not an error to keep */
        return 0;
    }
    return n;
}

static void version_strings(struct mok_env *env, bool with_gpu)
{
    copy_str(env->mok_version, sizeof(env->mok_version), MOK_VERSION);
    copy_str(env->commit, sizeof(env->commit), MOK_COMMIT);
    int v = 0;
    if (with_gpu && cudaRuntimeGetVersion(&v) == cudaSuccess)
        snprintf(env->cuda_runtime, sizeof(env->cuda_runtime), "%d.%d", v / 1000, (v % 1000) / 10);
    else
        copy_str(env->cuda_runtime, sizeof(env->cuda_runtime), "none");
    v = 0;
    if (with_gpu && cudaDriverGetVersion(&v) == cudaSuccess && v > 0)
        snprintf(env->cuda_driver, sizeof(env->cuda_driver), "%d.%d", v / 1000, (v % 1000) / 10);
    else
        copy_str(env->cuda_driver, sizeof(env->cuda_driver), "none");
    v = 0;
    if (ncclGetVersion(&v) == ncclSuccess)
        snprintf(env->nccl, sizeof(env->nccl), "%d.%d.%d", v / 10000, (v % 10000) / 100, v % 100);
    char mpi[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    MPI_Get_library_version(mpi, &len);
    char *nl = strchr(mpi, '\n');
    if (nl)
        *nl = '\0';
    char *comma = strchr(mpi, ',');
    if (comma) /* "Open MPI v4.1.6, package: ..." -> "Open MPI v4.1.6" */
        *comma = '\0';
    copy_str(env->mpi, sizeof(env->mpi), mpi);
}

/* Every rank contributes its mok_rank_info; all ranks get the table (the report header lists them). */
static void gather_rank_info(struct mok_cluster *cl, const struct mok_rank_info *mine)
{
    static struct mok_rank_info all[MOK_MAX_RANKS];
    int n = cl->nranks < MOK_MAX_RANKS ? cl->nranks : MOK_MAX_RANKS;
    if (cl->nranks <= MOK_MAX_RANKS) {
        MPI_Allgather(mine, (int)sizeof(*mine), MPI_BYTE, all, (int)sizeof(*mine), MPI_BYTE, MPI_COMM_WORLD);
    } else {
        all[0] = *mine; /* more ranks than the table holds: keep ours, say how many in nranks */
        n = 1;
    }
    memcpy(cl->env.ranks, all, sizeof(all[0]) * (size_t)n);
    cl->env.nrank_info = n;
    cl->env.nranks = cl->nranks;
    copy_str(cl->env.gpu, sizeof(cl->env.gpu), all[0].gpu);
    cl->env.sm_count = all[0].sm_count;
}

static void my_rank_info(const struct mok_cluster *cl, struct mok_rank_info *me)
{
    memset(me, 0, sizeof(*me));
    me->rank = cl->rank;
    me->pid = (int)getpid();
    me->device = cl->device;
    gethostname(me->host, sizeof(me->host) - 1);
    copy_str(me->gpu, sizeof(me->gpu), "none");
    if (cl->device >= 0) {
        struct cudaDeviceProp prop;
        if (cudaGetDeviceProperties(&prop, cl->device) == cudaSuccess) {
            copy_str(me->gpu, sizeof(me->gpu), prop.name);
            me->sm_count = prop.multiProcessorCount;
        }
    }
}

void mok_cluster_describe_cpu(struct mok_cluster *cl)
{
    version_strings(&cl->env, false);
    struct mok_rank_info me;
    my_rank_info(cl, &me);
    gather_rank_info(cl, &me);
}

int mok_cluster_init_gpu(struct mok_cluster *cl, char *err, int err_len)
{
    int ngpus = mok_cluster_gpu_count();
    /* Decide collectively: one rank without a GPU must not leave the others waiting in NCCL init. */
    int ok = cl->local_rank < ngpus, all_ok = 0;
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!all_ok) {
        snprintf(err, (size_t)err_len,
                 "rank %d: %d local ranks but %d GPUs visible on this host (one rank per GPU; check mpirun -np "
                 "and CUDA_VISIBLE_DEVICES)%s",
                 cl->rank, cl->local_size, ngpus, ok ? " [another rank failed]" : "");
        return -1;
    }
    cl->device = cl->local_rank;
    cudaError_t ce = cudaSetDevice(cl->device);
    if (ce == cudaSuccess)
        ce = cudaStreamCreateWithFlags(&cl->stream, cudaStreamNonBlocking);
    if (ce != cudaSuccess) {
        snprintf(err, (size_t)err_len, "rank %d: GPU %d: %s", cl->rank, cl->device, cudaGetErrorString(ce));
        return -1;
    }
    ncclUniqueId id;
    if (cl->rank == 0 && ncclGetUniqueId(&id) != ncclSuccess) {
        snprintf(err, (size_t)err_len, "ncclGetUniqueId failed");
        return -1;
    }
    MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD);
    ncclResult_t nr = ncclCommInitRank(&cl->nccl, cl->nranks, id, cl->rank);
    if (nr != ncclSuccess) {
        snprintf(err, (size_t)err_len, "rank %d: ncclCommInitRank: %s", cl->rank, ncclGetErrorString(nr));
        return -1;
    }
    cl->lsa_size = mok_nccl_lsa_size(cl->nccl);
    version_strings(&cl->env, true);
    struct mok_rank_info me;
    my_rank_info(cl, &me);
    gather_rank_info(cl, &me);
    cl->env.lsa_size = cl->lsa_size;
    return 0;
}

void mok_cluster_finalize(struct mok_cluster *cl)
{
    if (cl->nccl) {
        ncclCommFinalize(cl->nccl);
        ncclCommDestroy(cl->nccl);
        cl->nccl = NULL;
    }
    if (cl->stream)
        cudaStreamDestroy(cl->stream);
    if (cl->local_comm != MPI_COMM_NULL && cl->local_comm)
        MPI_Comm_free(&cl->local_comm);
    MPI_Finalize();
}

int mok_symmem_alloc(struct mok_cluster *cl, size_t bytes, struct mok_symmem *out, char *err, int err_len)
{
    memset(out, 0, sizeof(*out));
    ncclResult_t r = ncclMemAlloc(&out->ptr, bytes);
    if (r == ncclSuccess)
        r = ncclCommWindowRegister(cl->nccl, out->ptr, bytes, &out->window, NCCL_WIN_COLL_SYMMETRIC);
    if (r != ncclSuccess) {
        snprintf(err, (size_t)err_len, "rank %d: symmetric allocation of %zu bytes: %s", cl->rank, bytes,
                 ncclGetErrorString(r));
        if (out->ptr)
            ncclMemFree(out->ptr);
        memset(out, 0, sizeof(*out));
        return -1;
    }
    out->bytes = bytes;
    return 0;
}

void mok_symmem_free(struct mok_cluster *cl, struct mok_symmem *m)
{
    if (m->window)
        ncclCommWindowDeregister(cl->nccl, m->window);
    if (m->ptr)
        ncclMemFree(m->ptr);
    memset(m, 0, sizeof(*m));
}

long long mok_allreduce_max_ll(long long v)
{
    long long out = v;
    MPI_Allreduce(&v, &out, 1, MPI_LONG_LONG, MPI_MAX, MPI_COMM_WORLD);
    return out;
}
