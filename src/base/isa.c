/*
 * isa.c — the kernel ISA level, computed once from cpu_features() (isa.h).
 */
#include "isa.h"

#include <pthread.h>

#include "base/cpu.h"
#include "eddy.h"

/* ==== The level in force ==== */

static isa_level active;
static bool ext[ISA_EXT_COUNT];
static pthread_once_t once = PTHREAD_ONCE_INIT;

/* cpu_features() is empty under EDDY_FORCE_REF, which leaves ISA_REF. */
static void init_level(void) {
    const cpu_caps *c = cpu_features();
    active = ISA_REF;
#if defined(__x86_64__)
    if (cpu_has_avx2(c)) active = ISA_AVX2;
    if (cpu_has_avx2(c) && cpu_has_avx512(c)) active = ISA_AVX512;
    ext[ISA_EXT_AVX512VNNI] = active == ISA_AVX512 && c->avx512vnni;
    ext[ISA_EXT_AMX_BF16] = active == ISA_AVX512 && c->amx_bf16;
#elif defined(__aarch64__)
    if (c->neon) active = ISA_NEON;
    ext[ISA_EXT_DOTPROD] = active == ISA_NEON && c->dotprod;
#endif
    (void)c;
}

isa_level isa_active(void) {
    pthread_once(&once, init_level);
    return active;
}

/* ==== Queries ==== */

bool isa_available(isa_level isa) {
    const isa_level a = isa_active();
    switch (isa) {
    case ISA_REF: return true;
#if defined(__x86_64__)
    case ISA_AVX2: return a >= ISA_AVX2;
    case ISA_AVX512: return a >= ISA_AVX512;
#elif defined(__aarch64__)
    case ISA_NEON: return a == ISA_NEON;
#endif
    default: (void)a; return false;
    }
}

bool isa_has(isa_ext e) {
    pthread_once(&once, init_level);
    return (unsigned)e < ISA_EXT_COUNT && ext[e];
}

const char *isa_name(isa_level isa) {
    static const char *const names[ISA_COUNT] = {"ref", "avx2", "avx512", "neon"};
    return (unsigned)isa < ISA_COUNT ? names[isa] : "?";
}

const char *eddy_cpu_isa(void) { return isa_name(isa_active()); }
