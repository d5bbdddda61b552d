/* check.h -- the reliability tests' CHECK: a condition that fails prints where and why,
 * is counted in failures, and the test goes on; main returns failures != 0. */
#ifndef PT_TESTS_RELIABILITY_CHECK_H
#define PT_TESTS_RELIABILITY_CHECK_H

#include <stdio.h>

static int failures;

#define CHECK(cond, ...)                                                    \
    do {                                                                    \
        if (!(cond)) {                                                      \
            fprintf(stderr, "%s:%d: FAIL: ", __FILE__, __LINE__);           \
            fprintf(stderr, __VA_ARGS__);                                   \
            fputc('\n', stderr);                                            \
            failures++;                                                     \
        }                                                                   \
    } while (0)

#endif
