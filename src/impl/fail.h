/* fail.h: error returns for implementation code whose functions take (char *err, int err_len) and return -1 on
 * failure. FAIL formats the message; a CUDA, NCCL or cuBLAS call is checked with MOK_CHECK(lib, call, return -1)
 * of src/check_call.h. */
#ifndef MOK_IMPL_FAIL_H
#define MOK_IMPL_FAIL_H

#include <stdio.h>

#define FAIL(...)                                                                                             \
    do {                                                                                                      \
        snprintf(err, (size_t)err_len, __VA_ARGS__);                                                          \
        return -1;                                                                                            \
    } while (0)

#endif
