/*
 * test.h — eddy's small unit-test harness.
 *
 * A test is `TEST(name) { ... }` in any tests/test_*.c file; it registers itself.
 * CHECK* record a failure (file, line, expression) and carry on; REQUIRE* also end
 * the test. Random inputs come from test_rng seeded per test from the run's seed
 * (printed at the start; set EDDY_TEST_SEED to replay a run).
 *
 * The runner (test_main.c) prints one line per failing test, then "N passed, M failed".
 */
#ifndef EDDY_TEST_H
#define EDDY_TEST_H

#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

typedef void (*test_fn)(void);
void test_register(const char *name, const char *file, test_fn fn);

#define TEST(name)                                                             \
    static void test_##name(void);                                             \
    __attribute__((constructor)) static void test_register_##name(void) {      \
        test_register(#name, __FILE__, test_##name);                           \
    }                                                                          \
    static void test_##name(void)

/* Records a failure; returns cond so callers can stop early. */
bool test_check(bool cond, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#define CHECK(cond) test_check((cond), __FILE__, __LINE__, "%s", #cond)
#define CHECKF(cond, ...) test_check((cond), __FILE__, __LINE__, __VA_ARGS__)
/* Each operand is evaluated exactly once. */
bool test_check_eq(long long a, long long b, const char *ea, const char *eb, const char *file, int line);
#define CHECK_EQ(a, b) test_check_eq((long long)(a), (long long)(b), #a, #b, __FILE__, __LINE__)
bool test_check_str(const char *a, const char *b, const char *ea, const char *eb, const char *file, int line);
#define CHECK_STR(a, b) test_check_str((a), (b), #a, #b, __FILE__, __LINE__)
bool test_check_contains(const char *hay, const char *needle, const char *file, int line);
#define CHECK_CONTAINS(hay, needle) test_check_contains((hay), (needle), __FILE__, __LINE__)
#define REQUIRE(cond)                                                                    \
    do {                                                                                 \
        if (!CHECK(cond)) return;                                                        \
    } while (0)
#define REQUIRE_EQ(a, b)                                                                 \
    do {                                                                                 \
        if (!CHECK_EQ(a, b)) return;                                                     \
    } while (0)

/* ==== Randomness ==== */

typedef struct {
    uint64_t s;
} test_rng;

/* The seed for the running test: the run's seed mixed with the test's name. */
uint64_t test_seed(void);
test_rng test_rng_new(void); /* seeded with test_seed() */
uint64_t test_rng_u64(test_rng *r);
uint32_t test_rng_below(test_rng *r, uint32_t n); /* [0, n) */
float test_rng_uniform(test_rng *r, float lo, float hi);
float test_rng_normal(test_rng *r);

/* ==== Files ==== */

/* tests/data/<rel> ($EDDY_TEST_DATA overrides the directory). Static buffer. */
const char *test_data_path(const char *rel);
/* A fresh path in a per-run temporary directory. Static buffer. */
const char *test_tmp_path(const char *name);
/* Writes bytes to path; returns true on success. */
bool test_write_file(const char *path, const void *data, size_t n);
/* Reads a whole file into a malloc'd buffer (free with free); NULL on failure. */
void *test_read_file(const char *path, size_t *n);

/* ==== Numerics ==== */

/* sum((a-b)^2) / sum(b^2) (0 when both are zero). */
double test_nmse(const float *a, const float *ref, int64_t n);

#endif
