/*
 * cpu.h — run-time CPU feature detection.
 *
 * Kernels do not read these flags: base/isa.h turns them into the one ISA level
 * every dispatcher uses. Setting EDDY_FORCE_REF=1 in the environment clears every
 * flag, which leaves that level at ISA_REF (portable C).
 */
#ifndef EDDY_BASE_CPU_H
#define EDDY_BASE_CPU_H

#include <stdbool.h>

typedef struct {
    /* x86-64 */
    bool avx2, fma, f16c;
    bool avx512f, avx512bw, avx512vl, avx512dq, avx512vnni, avx512bf16;
    bool avx_vnni;
    bool amx_bf16; /* AMX tiles with bf16 products, tile state enabled by the OS and
                      granted to this process (Linux arch_prctl), so usable as is */
    /* aarch64 */
    bool neon, dotprod, fp16;
} cpu_caps;

/* Detected once (thread-safe), then cached. */
const cpu_caps *cpu_features(void);

/* The hardware's features regardless of EDDY_FORCE_REF. */
cpu_caps cpu_detect(void);

/* True when EDDY_FORCE_REF is set to a non-empty value other than "0". */
bool cpu_force_ref(void);

/* Convenience for dispatch: AVX2 with FMA and F16C (the Haswell baseline). */
static inline bool cpu_has_avx2(const cpu_caps *c) { return c->avx2 && c->fma && c->f16c; }
/* AVX-512 F+BW+VL+DQ (Skylake-X baseline). */
static inline bool cpu_has_avx512(const cpu_caps *c) {
    return c->avx512f && c->avx512bw && c->avx512vl && c->avx512dq;
}

#endif
