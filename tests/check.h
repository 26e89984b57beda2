/* check.h: the CPU unit tests' assertion. A CHECK that fails prints its file, line and message and is counted;
 * the test goes on, so one run lists every failure, and main returns failures ? 1 : 0. */
#ifndef MOK_TESTS_CHECK_H
#define MOK_TESTS_CHECK_H

#include <stdio.h>

static int failures;
#define CHECK(cond, ...)                                                                                      \
    do {                                                                                                      \
        if (!(cond)) {                                                                                        \
            failures++;                                                                                       \
            printf("FAIL %s:%d: ", __FILE__, __LINE__);                                                       \
            printf(__VA_ARGS__);                                                                              \
            printf("\n");                                                                                     \
        }                                                                                                     \
    } while (0)

#endif
