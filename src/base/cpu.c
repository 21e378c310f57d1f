/*
 * cpu.c — CPUID/XGETBV on x86-64, HWCAP on aarch64.
 *
 * A feature counts only when both the CPU has it and the OS saves its register
 * state (XCR0), otherwise AVX code would fault on an OS that does not enable it.
 * Also: the count of CPUs this process may use (affinity mask, cgroup CPU quota).
 */
#define _GNU_SOURCE
#include "cpu.h"

#include "eddy.h"

#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "alloc.h"
#include "env.h"
#include "log.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>

#if defined(__linux__) && defined(__x86_64__)
#include <sys/syscall.h>
#include <unistd.h>
/* Linux hands out the 8 KiB AMX tile state only on request (once per process). */
static bool amx_permission(void) {
    enum { ARCH_REQ_XCOMP_PERM = 0x1023, XFEATURE_XTILEDATA = 18 };
    return syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0;
}
#else
static bool amx_permission(void) { return false; }
#endif

static uint64_t read_xcr0(void) {
    uint32_t eax, edx;
    __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
    return ((uint64_t)edx << 32) | eax;
}

cpu_caps cpu_detect(void) {
    cpu_caps c;
    memset(&c, 0, sizeof c);
    unsigned a, b, cx, d;
    if (!__get_cpuid(1, &a, &b, &cx, &d)) return c;
    bool osxsave = (cx >> 27) & 1;
    bool avx = (cx >> 28) & 1;
    bool fma = (cx >> 12) & 1;
    bool f16c = (cx >> 29) & 1;
    if (!osxsave || !avx) return c;
    uint64_t xcr0 = read_xcr0();
    bool ymm_ok = (xcr0 & 0x6) == 0x6;   /* SSE and AVX state */
    bool zmm_ok = (xcr0 & 0xe6) == 0xe6; /* plus opmask and ZMM state */
    if (!ymm_ok) return c;
    unsigned max_leaf = __get_cpuid_max(0, NULL);
    if (max_leaf < 7) return c;
    __cpuid_count(7, 0, a, b, cx, d);
    c.avx2 = (b >> 5) & 1;
    c.fma = fma;
    c.f16c = f16c;
    if (zmm_ok) {
        c.avx512f = (b >> 16) & 1;
        c.avx512dq = (b >> 17) & 1;
        c.avx512bw = (b >> 30) & 1;
        c.avx512vl = (b >> 31) & 1;
        c.avx512vnni = (cx >> 11) & 1;
    }
    unsigned a1, b1, c1, d1;
    __cpuid_count(7, 1, a1, b1, c1, d1);
    (void)b1, (void)c1, (void)d1;
    c.avx_vnni = (a1 >> 4) & 1;
    if (zmm_ok) c.avx512bf16 = (a1 >> 5) & 1;
    /* AMX: AMX-TILE (bit 24) and AMX-BF16 (bit 22) in leaf 7 EDX, tile config and data
     * state (XCR0 bits 17, 18) enabled, and the kernel's permission for this process */
    const bool amx_cpu = ((d >> 24) & 1) && ((d >> 22) & 1) && (xcr0 & (3u << 17)) == (3u << 17);
    c.amx_bf16 = zmm_ok && c.avx512bf16 && amx_cpu && amx_permission();
    return c;
}

#elif defined(__aarch64__)
#include <sys/auxv.h>
#ifndef HWCAP_ASIMD
#define HWCAP_ASIMD (1 << 1)
#endif
#ifndef HWCAP_ASIMDHP
#define HWCAP_ASIMDHP (1 << 10)
#endif
#ifndef HWCAP_ASIMDDP
#define HWCAP_ASIMDDP (1 << 20)
#endif

cpu_caps cpu_detect(void) {
    cpu_caps c;
    memset(&c, 0, sizeof c);
    unsigned long hw = getauxval(AT_HWCAP);
    c.neon = (hw & HWCAP_ASIMD) != 0;
    c.fp16 = (hw & HWCAP_ASIMDHP) != 0;
    c.dotprod = (hw & HWCAP_ASIMDDP) != 0;
    return c;
}

#else
cpu_caps cpu_detect(void) {
    cpu_caps c;
    memset(&c, 0, sizeof c);
    return c;
}
#endif

bool cpu_force_ref(void) {
    return env_flag("EDDY_FORCE_REF");
}

static bool turn_off_one(cpu_caps *c, const char *name, size_t len) {
#define IS(s) (len == sizeof(s) - 1 && memcmp(name, s, len) == 0)
    if (IS("amx")) {
        c->amx_bf16 = false;
    } else if (IS("vnni")) {
        c->avx512vnni = c->avx_vnni = false;
    } else if (IS("avx512")) {
        c->avx512f = c->avx512bw = c->avx512vl = c->avx512dq = c->avx512vnni = c->avx512bf16 = false;
        c->amx_bf16 = false;
    } else if (IS("avx2")) {
        const bool neon = c->neon, dotprod = c->dotprod, fp16 = c->fp16;
        memset(c, 0, sizeof *c);
        c->neon = neon, c->dotprod = dotprod, c->fp16 = fp16;
    } else if (IS("dotprod")) {
        c->dotprod = false;
    } else if (IS("neon")) {
        c->neon = c->dotprod = c->fp16 = false;
    } else {
        return false;
    }
    return true;
#undef IS
}

bool cpu_turn_off(cpu_caps *c, const char *names) {
    bool ok = true;
    for (const char *p = names; *p;) {
        size_t len = strcspn(p, ", ");
        if (len > 0 && !turn_off_one(c, p, len)) ok = false;
        p += len;
        p += strspn(p, ", ");
    }
    return ok;
}

static cpu_caps cached;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void init_cached(void) {
    if (cpu_force_ref()) {
        memset(&cached, 0, sizeof cached);
        return;
    }
    cached = cpu_detect();
    const char *off = getenv("EDDY_CPU_OFF");
    if (off && !cpu_turn_off(&cached, off))
        LOG_WARN("EDDY_CPU_OFF=%s: only amx, vnni, avx512, avx2, dotprod and neon can be turned off; "
                 "the other names are ignored", off);
}

const cpu_caps *cpu_features(void) {
    pthread_once(&once, init_cached);
    return &cached;
}

/* ==== Feature names for display ==== */

static char feature_text[192];
static pthread_once_t text_once = PTHREAD_ONCE_INIT;

static void append_name(bool on, const char *name) {
    if (!on) return;
    if (feature_text[0]) strcat(feature_text, " ");
    strcat(feature_text, name);
}

static void build_text(void) {
    const cpu_caps *c = cpu_features();
    feature_text[0] = '\0';
    append_name(c->avx2, "avx2");
    append_name(c->fma, "fma");
    append_name(c->f16c, "f16c");
    append_name(c->avx512f, "avx512f");
    append_name(c->avx512bw, "avx512bw");
    append_name(c->avx512vl, "avx512vl");
    append_name(c->avx512dq, "avx512dq");
    append_name(c->avx512vnni, "avx512vnni");
    append_name(c->avx512bf16, "avx512bf16");
    append_name(c->amx_bf16, "amx-bf16");
    append_name(c->avx_vnni, "avxvnni");
    append_name(c->neon, "neon");
    append_name(c->dotprod, "dotprod");
    append_name(c->fp16, "fp16");
    if (!feature_text[0]) strcpy(feature_text, "none");
}

const char *eddy_cpu_features(void) {
    pthread_once(&text_once, build_text);
    return feature_text;
}

/* ==== CPUs this process may use ==== */

int cpu_affinity_count(void) {
#if defined(__linux__)
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) return CPU_COUNT(&set) > 0 ? CPU_COUNT(&set) : 1;
    /* more than CPU_SETSIZE CPUs: a mask sized for the kernel's count */
    for (int n = 2 * CPU_SETSIZE; n <= (1 << 20); n *= 2) {
        const size_t bytes = CPU_ALLOC_SIZE(n);
        cpu_set_t *big = eddy_malloc(bytes);
        if (!big) break;
        int count = sched_getaffinity(0, bytes, big) == 0 ? CPU_COUNT_S(bytes, big) : -1;
        eddy_free(big);
        if (count > 0) return count;
    }
#endif
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > (1 << 20) ? (1 << 20) : (int)n;
}

/* Whole CPUs (rounded up) that `quota` of every `period` microseconds give; 0: none. */
static int quota_cpus(long long quota, long long period) {
    if (quota <= 0 || period <= 0) return 0;
    long long n = quota / period + (quota % period != 0);
    return n > (1 << 20) ? (1 << 20) : (int)n;
}

int cpu_parse_cpu_max(const char *text) {
    char quota[32];
    long long period;
    if (sscanf(text, "%31s %lld", quota, &period) != 2) return 0;
    char *end;
    long long q = strtoll(quota, &end, 10);
    return end == quota || *end ? 0 : quota_cpus(q, period);
}

/* Reads a small file into buf (NUL-terminated); false when it cannot. */
static bool read_small(const char *path, char *buf, size_t size) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return false;
    ssize_t n = read(fd, buf, size - 1);
    close(fd);
    if (n <= 0) return false;
    buf[n] = '\0';
    return true;
}

/* The path of the line of /proc/self/cgroup whose controller list (the second
 * ':'-separated field) is `want` ("" for v2's unified line) or has it as one of its
 * comma-separated names, copied into out; false when there is no such line. */
static bool cgroup_path(const char *self, const char *want, char *out, size_t size) {
    const size_t wn = strlen(want);
    for (const char *line = self; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
        const char *c1 = strchr(line, ':'), *eol = strchr(line, '\n');
        if (!eol) eol = line + strlen(line);
        if (!c1 || c1 > eol) continue;
        const char *c2 = memchr(c1 + 1, ':', (size_t)(eol - c1 - 1));
        if (!c2) continue;
        bool match = wn == 0 && c2 == c1 + 1;
        for (const char *n = c1 + 1; wn && !match && n < c2;) {
            const char *comma = memchr(n, ',', (size_t)(c2 - n));
            const char *e = comma ? comma : c2;
            match = (size_t)(e - n) == wn && !memcmp(n, want, wn);
            n = e + 1;
        }
        const size_t len = (size_t)(eol - c2 - 1);
        if (!match || len == 0 || len >= size) continue;
        memcpy(out, c2 + 1, len);
        out[len] = '\0';
        return true;
    }
    return false;
}

/* The tightest quota from dir up to its ancestor `top` (a prefix of dir): v2's
 * cpu.max, or v1's cpu.cfs_quota_us and cpu.cfs_period_us. 0: none. */
static int walk_quota(char *dir, size_t top, bool v2) {
    int best = 0;
    char path[4200], text[128], period[64];
    for (;;) {
        int q = 0;
        if (v2) {
            snprintf(path, sizeof path, "%s/cpu.max", dir);
            if (read_small(path, text, sizeof text)) q = cpu_parse_cpu_max(text);
        } else {
            snprintf(path, sizeof path, "%s/cpu.cfs_quota_us", dir);
            bool ok = read_small(path, text, sizeof text);
            snprintf(path, sizeof path, "%s/cpu.cfs_period_us", dir);
            if (ok && read_small(path, period, sizeof period)) q = quota_cpus(atoll(text), atoll(period));
        }
        if (q > 0 && (best == 0 || q < best)) best = q;
        char *slash = strrchr(dir, '/');
        if (strlen(dir) <= top || !slash || (size_t)(slash - dir) < top) break;
        *slash = '\0';
    }
    return best;
}

int cpu_quota_count(const char *root, const char *self) {
    char rel[4096], dir[4096 + 256];
    int best = 0;
    /* v2: one unified hierarchy at root (or root/unified on hybrid systems) */
    if (cgroup_path(self, "", rel, sizeof rel)) {
        static const char *const mounts[] = {"", "/unified"};
        for (int i = 0; i < 2 && best == 0; i++) {
            int top = snprintf(dir, sizeof dir, "%s%s", root, mounts[i]);
            snprintf(dir + top, sizeof dir - (size_t)top, "%s", strcmp(rel, "/") ? rel : "");
            best = walk_quota(dir, (size_t)top, true);
        }
    }
    /* v1: the cpu controller's own mount */
    if (cgroup_path(self, "cpu", rel, sizeof rel)) {
        static const char *const mounts[] = {"/cpu", "/cpu,cpuacct", "/cpuacct,cpu"};
        for (int i = 0; i < 3; i++) {
            int top = snprintf(dir, sizeof dir, "%s%s", root, mounts[i]);
            snprintf(dir + top, sizeof dir - (size_t)top, "%s", strcmp(rel, "/") ? rel : "");
            int q = walk_quota(dir, (size_t)top, false);
            if (q > 0 && (best == 0 || q < best)) best = q;
        }
    }
    return best;
}

int cpu_usable_count(void) {
    int n = cpu_affinity_count();
#if defined(__linux__)
    char self[4096];
    if (read_small("/proc/self/cgroup", self, sizeof self)) {
        int q = cpu_quota_count("/sys/fs/cgroup", self);
        if (q > 0 && q < n) n = q;
    }
#endif
    return n < 1 ? 1 : n;
}
