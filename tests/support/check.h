/* Checks for unit tests: a failed check is printed (file:line and the expression) and counted
 * in test_failures; the test goes on. A test's main() returns non-zero when test_failures is.
 *
 *   CHECK(cond)                  the condition holds
 *   CHECKF(cond, fmt, ...)       the same, and a failure also prints the printf-style message
 *   CHECK_KERR(got, want)        two Kafka error codes (int16_t) are equal; prints both names
 *
 * Any thread may fail a check (the counter is incremented atomically). */
#ifndef GR_TESTS_SUPPORT_CHECK_H
#define GR_TESTS_SUPPORT_CHECK_H

#include <stdint.h>
#include <stdio.h>

#include "common/kerr.h"

extern int test_failures;

#define CHECK_FAILED_() __atomic_add_fetch(&test_failures, 1, __ATOMIC_RELAXED)

#define CHECK(c)                                                                  \
    do {                                                                          \
        if (!(c)) {                                                               \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #c); \
            CHECK_FAILED_();                                                      \
        }                                                                         \
    } while (0)

#define CHECKF(c, ...)                                                            \
    do {                                                                          \
        if (!(c)) {                                                               \
            fprintf(stderr, "%s:%d: CHECK(%s) failed: ", __FILE__, __LINE__, #c); \
            fprintf(stderr, __VA_ARGS__);                                         \
            fputc('\n', stderr);                                                  \
            CHECK_FAILED_();                                                      \
        }                                                                         \
    } while (0)

#define CHECK_KERR(got, want)                                                                                    \
    do {                                                                                                         \
        int16_t g_ = (got), w_ = (want);                                                                         \
        if (g_ != w_) {                                                                                          \
            fprintf(stderr, "%s:%d: got %s, want %s\n", __FILE__, __LINE__, gr_kerr_name(g_), gr_kerr_name(w_)); \
            CHECK_FAILED_();                                                                                     \
        }                                                                                                        \
    } while (0)

#endif
