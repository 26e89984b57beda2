/* test_check_call: MOK_CHECK (src/check_call.h) on the CPU, with each library's real error strings (the lookups
 * need no GPU; MPI's needs MPI_Init, a singleton here). A failed call leaves "file:line: call text: error string"
 * and runs the site's own action once; a successful one leaves err and the flow alone; the call is evaluated
 * once; the text is the call as written, also through a wrapping macro; err may be NULL or short. */
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>
#include <string.h>

#include "check.h"
#include "check_call.h"

static int calls;
static int count(int rc)
{
    calls++;
    return rc;
}

/* The expected message of a failure reported at line `line` of this file. */
static void expect(const char *err, int line, const char *text, const char *what)
{
    char want[512];
    snprintf(want, sizeof want, "%s:%d: %s: %s", __FILE__, line, text, what);
    CHECK(strcmp(err, want) == 0, "got [%s], want [%s]", err, want);
}

/* Each returns -1 after a failure, 0 after success, like the implementations' functions. */
static int cuda_fails(char *err, int err_len, int *line)
{
    *line = __LINE__ + 1;
    MOK_CHECK(cuda, count(cudaErrorMemoryAllocation), return -1);
    return 0;
}

static int nccl_fails(char *err, int err_len, int *line)
{
    *line = __LINE__ + 1;
    MOK_CHECK(nccl, ncclInvalidArgument, return -1);
    return 0;
}

static int cublas_fails(char *err, int err_len, int *line)
{
    *line = __LINE__ + 1;
    MOK_CHECK(cublas, CUBLAS_STATUS_NOT_INITIALIZED, return -1);
    return 0;
}

static int mpi_fails(char *err, int err_len, int *line)
{
    *line = __LINE__ + 1;
    MOK_CHECK(mpi, MPI_ERR_ARG, return -1);
    return 0;
}

static int mixed_fails(char *err, int err_len, int *line)
{
    *line = __LINE__ + 1;
    MOK_CHECK(cuda_or_cublas, (int)CUBLAS_STATUS_EXECUTION_FAILED, return -1);
    return 0;
}

/* A cleanup label, and a macro that wraps MOK_CHECK: its text is the call as written, not macro-expanded. */
#define TWICE(x) ((x) * 2)
#define WRAPPED(call) MOK_CHECK_AS(cuda, call, #call, goto out)
static int goto_out(char *err, int err_len, int *line, int *cleaned)
{
    int rc = -1;
    WRAPPED(count(TWICE(0)));
    *line = __LINE__ + 1;
    WRAPPED(count(TWICE(1)));
    rc = 0;
out:
    (*cleaned)++;
    return rc;
}

static int all_succeed(char *err, int err_len)
{
    MOK_CHECK(cuda, count(cudaSuccess), return -1);
    MOK_CHECK(nccl, ncclSuccess, return -1);
    MOK_CHECK(cublas, CUBLAS_STATUS_SUCCESS, return -1);
    MOK_CHECK(mpi, MPI_SUCCESS, return -1);
    MOK_CHECK(cuda_or_cublas, 0, return -1);
    return 0;
}

int main(int argc, char **argv)
{
    if (MPI_Init(&argc, &argv) != MPI_SUCCESS) {
        printf("FAIL MPI_Init\n");
        return 1;
    }
    char err[512], mpi_what[MPI_MAX_ERROR_STRING];
    int line = 0, n = 0;

    calls = 0;
    err[0] = '\0';
    CHECK(cuda_fails(err, sizeof err, &line) == -1, "cuda: no failure returned");
    expect(err, line, "count(cudaErrorMemoryAllocation)", cudaGetErrorString(cudaErrorMemoryAllocation));
    CHECK(calls == 1, "cuda: the call ran %d times", calls);

    CHECK(nccl_fails(err, sizeof err, &line) == -1, "nccl: no failure returned");
    expect(err, line, "ncclInvalidArgument", ncclGetErrorString(ncclInvalidArgument));

    CHECK(cublas_fails(err, sizeof err, &line) == -1, "cublas: no failure returned");
    expect(err, line, "CUBLAS_STATUS_NOT_INITIALIZED", cublasGetStatusString(CUBLAS_STATUS_NOT_INITIALIZED));

    CHECK(mpi_fails(err, sizeof err, &line) == -1, "mpi: no failure returned");
    MPI_Error_string(MPI_ERR_ARG, mpi_what, &n);
    expect(err, line, "MPI_ERR_ARG", mpi_what);

    CHECK(mixed_fails(err, sizeof err, &line) == -1, "cuda_or_cublas: no failure returned");
    char mixed[64];
    snprintf(mixed, sizeof mixed, "cuBLAS/CUDA status %d", (int)CUBLAS_STATUS_EXECUTION_FAILED);
    expect(err, line, "(int)CUBLAS_STATUS_EXECUTION_FAILED", mixed);

    calls = 0;
    int cleaned = 0;
    CHECK(goto_out(err, sizeof err, &line, &cleaned) == -1, "goto: no failure returned");
    CHECK(cleaned == 1, "goto: the cleanup ran %d times", cleaned);
    CHECK(calls == 2, "goto: %d calls, want 2 (the first succeeds, the second fails)", calls);
    expect(err, line, "count(TWICE(1))", cudaGetErrorString((cudaError_t)2));

    calls = 0;
    strcpy(err, "untouched");
    CHECK(all_succeed(err, sizeof err) == 0, "success: a failure returned");
    CHECK(strcmp(err, "untouched") == 0, "success: err became [%s]", err);
    CHECK(calls == 1, "success: the call ran %d times", calls);

    /* NULL err (libmok allows it) and a buffer too short for the message: the action still runs */
    CHECK(cuda_fails(NULL, 0, &line) == -1, "NULL err: no failure returned");
    char tiny[8];
    volatile int tiny_len = sizeof tiny; /* unknown to the compiler: the cut is the point, not a warning */
    memset(tiny, 'x', sizeof tiny);
    CHECK(nccl_fails(tiny, tiny_len, &line) == -1, "short err: no failure returned");
    CHECK(tiny[sizeof tiny - 1] == '\0' && strlen(tiny) == sizeof tiny - 1, "short err: not cut and terminated");

    MPI_Finalize();
    printf("%s\n", failures ? "test_check_call: FAILED" : "test_check_call: ok");
    return failures ? 1 : 0;
}
