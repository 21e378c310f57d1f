/*
 * cpu.c — CPUID/XGETBV on x86-64, HWCAP on aarch64.
 *
 * A feature counts only when both the CPU has it and the OS saves its register
 * state (XCR0), otherwise AVX code would fault on an OS that does not enable it.
 */
#define _GNU_SOURCE
#include "cpu.h"

#include "eddy.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

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
    const char *s = getenv("EDDY_FORCE_REF");
    return s && *s && strcmp(s, "0") != 0;
}

static cpu_caps cached;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void init_cached(void) {
    if (cpu_force_ref())
        memset(&cached, 0, sizeof cached);
    else
        cached = cpu_detect();
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
