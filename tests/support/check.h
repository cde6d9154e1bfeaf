/* CHECK for unit tests: a failed condition is printed (file:line and the expression) and
 * counted in test_failures; the test goes on. A test's main() returns non-zero when
 * test_failures is. */
#ifndef GR_TESTS_SUPPORT_CHECK_H
#define GR_TESTS_SUPPORT_CHECK_H

#include <stdio.h>

extern int test_failures;

#define CHECK(c)                                                                  \
    do {                                                                          \
        if (!(c)) {                                                               \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #c); \
            test_failures++;                                                      \
        }                                                                         \
    } while (0)

#endif
