/*
 * test_main.c — the test runner: runs every registered test (or those whose name
 * contains one of the command-line arguments) and prints "N passed, M failed".
 */
#define _GNU_SOURCE
#include "test.h"

#include <stdarg.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define MAX_TESTS 4096

static struct {
    const char *name, *file;
    test_fn fn;
} tests[MAX_TESTS];
static int n_tests;

static const char *current_name;
static int current_failures;
static uint64_t run_seed;

void test_register(const char *name, const char *file, test_fn fn) {
    if (n_tests == MAX_TESTS) {
        fprintf(stderr, "too many tests\n");
        exit(2);
    }
    tests[n_tests].name = name;
    tests[n_tests].file = file;
    tests[n_tests].fn = fn;
    n_tests++;
}

bool test_check(bool cond, const char *file, int line, const char *fmt, ...) {
    if (cond) return true;
    current_failures++;
    if (current_failures <= 10) {
        fprintf(stderr, "  %s:%d: %s: check failed: ", file, line, current_name);
        va_list ap;
        va_start(ap, fmt);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
        fputc('\n', stderr);
    } else if (current_failures == 11) {
        fprintf(stderr, "  %s: further failures not shown\n", current_name);
    }
    return false;
}

bool test_check_eq(long long a, long long b, const char *ea, const char *eb, const char *file, int line) {
    return test_check(a == b, file, line, "%s == %s (%lld vs %lld)", ea, eb, a, b);
}

bool test_check_str(const char *a, const char *b, const char *ea, const char *eb, const char *file, int line) {
    return test_check(a && b && strcmp(a, b) == 0, file, line, "%s == %s (\"%s\" vs \"%s\")", ea, eb,
                      a ? a : "(null)", b ? b : "(null)");
}

bool test_check_contains(const char *hay, const char *needle, const char *file, int line) {
    return test_check(hay && strstr(hay, needle) != NULL, file, line, "\"%s\" should contain \"%s\"",
                      hay ? hay : "(null)", needle);
}

/* ==== Randomness (splitmix64) ==== */

static uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

uint64_t test_seed(void) {
    uint64_t h = run_seed;
    for (const char *p = current_name ? current_name : ""; *p; p++) h = mix64(h ^ (uint8_t)*p);
    return h;
}

test_rng test_rng_new(void) {
    test_rng r = {test_seed()};
    return r;
}

uint64_t test_rng_u64(test_rng *r) {
    r->s += 0x9e3779b97f4a7c15ull;
    return mix64(r->s);
}

uint32_t test_rng_below(test_rng *r, uint32_t n) { return (uint32_t)(test_rng_u64(r) % n); }

float test_rng_uniform(test_rng *r, float lo, float hi) {
    double u = (double)(test_rng_u64(r) >> 11) * (1.0 / 9007199254740992.0);
    return (float)(lo + (hi - lo) * u);
}

float test_rng_normal(test_rng *r) {
    double u1 = ((double)(test_rng_u64(r) >> 11) + 1.0) * (1.0 / 9007199254740993.0);
    double u2 = (double)(test_rng_u64(r) >> 11) * (1.0 / 9007199254740992.0);
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

/* ==== Files ==== */

const char *test_data_path(const char *rel) {
    static char buf[4096];
    const char *dir = getenv("EDDY_TEST_DATA");
    snprintf(buf, sizeof buf, "%s/%s", dir ? dir : "tests/data", rel);
    return buf;
}

static char tmp_dir[256];

const char *test_tmp_path(const char *name) {
    static char buf[4096];
    if (!tmp_dir[0]) {
        const char *base = getenv("TMPDIR");
        snprintf(tmp_dir, sizeof tmp_dir, "%s/eddy-tests-XXXXXX", base ? base : "/tmp");
        if (!mkdtemp(tmp_dir)) {
            perror("mkdtemp");
            exit(2);
        }
    }
    snprintf(buf, sizeof buf, "%s/%s", tmp_dir, name);
    return buf;
}

bool test_write_file(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) return false;
    bool ok = fwrite(data, 1, n, f) == n;
    return (fclose(f) == 0) && ok;
}

void *test_read_file(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    void *buf = malloc(size > 0 ? (size_t)size : 1);
    if (buf && fread(buf, 1, (size_t)size, f) != (size_t)size) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    if (buf) *n = (size_t)size;
    return buf;
}

double test_nmse(const float *a, const float *ref, int64_t n) {
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = (double)a[i] - (double)ref[i];
        num += d * d;
        den += (double)ref[i] * (double)ref[i];
    }
    if (den == 0) return num == 0 ? 0 : INFINITY;
    return num / den;
}

static void remove_tmp_dir(void) {
    if (!tmp_dir[0]) return;
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp_dir);
    if (system(cmd) != 0) fprintf(stderr, "warning: could not remove %s\n", tmp_dir);
}

/* A test runs when no words are given, or when one of them is part of its name or of its
 * source file's path (`eddy-cuda-tests test_cuda_kernels`: the kernel tests only). */
static bool selected(const char *name, const char *file, int argc, char **argv) {
    if (argc <= 1) return true;
    for (int i = 1; i < argc; i++)
        if (strstr(name, argv[i]) || strstr(file, argv[i])) return true;
    return false;
}

int main(int argc, char **argv) {
    const char *s = getenv("EDDY_TEST_SEED");
    run_seed = s ? strtoull(s, NULL, 0) : ((uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32));
    printf("eddy tests: seed %llu (replay with EDDY_TEST_SEED=%llu)\n", (unsigned long long)run_seed,
           (unsigned long long)run_seed);
    fflush(stdout);
    int passed = 0, failed = 0;
    for (int i = 0; i < n_tests; i++) {
        if (!selected(tests[i].name, tests[i].file, argc, argv)) continue;
        current_name = tests[i].name;
        current_failures = 0;
        tests[i].fn();
        if (current_failures) {
            failed++;
            printf("FAIL %s (%s, test seed %llu)\n", tests[i].name, tests[i].file,
                   (unsigned long long)test_seed());
        } else {
            passed++;
            if (getenv("EDDY_TEST_VERBOSE")) printf("ok   %s\n", tests[i].name);
        }
        fflush(stdout);
    }
    remove_tmp_dir();
    printf("%d passed, %d failed\n", passed, failed);
    fflush(stdout); /* before LeakSanitizer's report at exit */
    return failed ? 1 : 0;
}
