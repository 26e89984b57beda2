/* check_call: the one check of a CUDA, NCCL, cuBLAS or MPI result in host C. A failed call leaves
 * "file:line: call text: error string" in the caller's err buffer, and the call site says what happens next:
 *
 *     MOK_CHECK(cuda, cudaMalloc(&p, n), return -1);               src/impl: (char *err, int err_len) -> -1
 *     MOK_CHECK(nccl, ncclGroupEnd(), goto fail);                   cleanup at a label
 *     MOK_CHECK(cuda, cudaMemset(p, 0, n), return MOK_ERR_CUDA);    libmok: a status code, the message in err
 *
 * lib is one of cuda (a cudaError_t, or an int holding one: the launchers of kernels/mok_kernels.h), nccl,
 * cublas, mpi, and cuda_or_cublas (an int that is either: src/impl/gemm_cublas.h returns those, and the two
 * enums overlap, so it prints the number). The names err and err_len must be in scope (err may be NULL); the
 * call is evaluated once. The lookups below name each library's own symbols and this header includes none of
 * the libraries' headers, so a file that checks NCCL results includes nccl.h itself, and libmok (no MPI) or a
 * test (no NCCL) can use it alike. */
#ifndef MOK_CHECK_CALL_H
#define MOK_CHECK_CALL_H

#include <stdio.h>

/* The one formatting path. */
static inline void mok_call_error(char *err, int err_len, const char *file, int line, const char *call,
                                  const char *what)
{
    if (err && err_len > 0)
        snprintf(err, (size_t)err_len, "%s:%d: %s: %s", file, line, call, what);
}

/* Per library: the success value, the size of the scratch buffer its message needs, and the message of code rc
 * (buf: that scratch, n bytes). */
#define MOK_CALL_OK_cuda cudaSuccess
#define MOK_CALL_BUF_cuda 1
#define MOK_CALL_STRING_cuda(rc, buf, n) cudaGetErrorString((cudaError_t)(rc))

#define MOK_CALL_OK_nccl ncclSuccess
#define MOK_CALL_BUF_nccl 1
#define MOK_CALL_STRING_nccl(rc, buf, n) ncclGetErrorString((ncclResult_t)(rc))

#define MOK_CALL_OK_cublas CUBLAS_STATUS_SUCCESS
#define MOK_CALL_BUF_cublas 1
#define MOK_CALL_STRING_cublas(rc, buf, n) cublasGetStatusString((cublasStatus_t)(rc))

/* MPI_Error_string writes up to MPI_MAX_ERROR_STRING characters; the length it returns is not needed. */
#define MOK_CALL_OK_mpi MPI_SUCCESS
#define MOK_CALL_BUF_mpi MPI_MAX_ERROR_STRING
#define MOK_CALL_STRING_mpi(rc, buf, n) \
    (MPI_Error_string((rc), (buf), &(int){0}) == MPI_SUCCESS ? (const char *)(buf) : "unknown MPI error")

#define MOK_CALL_OK_cuda_or_cublas 0
#define MOK_CALL_BUF_cuda_or_cublas 32
#define MOK_CALL_STRING_cuda_or_cublas(rc, buf, n) (snprintf((buf), (size_t)(n), "cuBLAS/CUDA status %d", (rc)), (buf))

/* The check. MOK_CHECK_AS takes the call's text apart, for a macro that wraps MOK_CHECK: it passes #call from its
 * own parameter, which would otherwise reach here macro-expanded. */
#define MOK_CHECK(lib, call, on_fail) MOK_CHECK_AS(lib, call, #call, on_fail)
#define MOK_CHECK_AS(lib, call, text, on_fail)                                                                    \
    do {                                                                                                          \
        int mok_rc_ = (int)(call);                                                                                \
        if (mok_rc_ != (int)MOK_CALL_OK_##lib) {                                                                  \
            char mok_buf_[MOK_CALL_BUF_##lib]; /* scratch for the libraries that format their message */          \
            (void)mok_buf_;                                                                                       \
            mok_call_error(err, err_len, __FILE__, __LINE__, text,                                                \
                           MOK_CALL_STRING_##lib(mok_rc_, mok_buf_, (int)sizeof mok_buf_));                        \
            on_fail;                                                                                              \
        }                                                                                                         \
    } while (0)

#endif
