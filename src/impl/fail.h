/* fail.h: error returns for implementation code whose functions take (char *err, int err_len) and return -1 on
 * failure. FAIL formats the message; CUDA checks a call that returns a cudaError_t, or an int holding one (the
 * kernel launchers of kernels/mok_kernels.h), and fails with the file, line, call and CUDA's error string. */
#ifndef MOK_IMPL_FAIL_H
#define MOK_IMPL_FAIL_H

#include <stdio.h>

#define FAIL(...)                                                                                             \
    do {                                                                                                      \
        snprintf(err, (size_t)err_len, __VA_ARGS__);                                                          \
        return -1;                                                                                            \
    } while (0)
#define CUDA(call)                                                                                            \
    do {                                                                                                      \
        cudaError_t e_ = (cudaError_t)(call);                                                                 \
        if (e_ != cudaSuccess)                                                                                \
            FAIL("%s:%d: %s: %s", __FILE__, __LINE__, #call, cudaGetErrorString(e_));                         \
    } while (0)

#endif
