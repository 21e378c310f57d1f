/*
 * isa.h — the instruction-set level the CPU kernels run at, chosen once per process.
 *
 * Owns: the list of levels, the level in force (isa_active), whether a level or an
 * extension can run here (isa_available, isa_has), and their names. Does not own the
 * feature detection (cpu.h, which it reads) or any kernel: each kernel family keeps
 * its own table of per-level implementations and indexes it with isa_active() (the
 * dispatcher) or with a level the caller names (the `_isa` entries of tests and
 * benchmarks, after isa_available() said yes).
 *
 * The level is computed once, on first use (thread-safe), from cpu_features(): the
 * best level compiled for this architecture that the CPU and the OS support, or
 * ISA_REF when EDDY_FORCE_REF=1 (cpu_features() then reports nothing) or when the CPU
 * has none of them. Under ISA_REF every family runs portable C: its _ref oracle, or
 * its scalar kernel table where the fast algorithm differs from the oracle's (the
 * chunked scans); so EDDY_FORCE_REF=1 reproduces what a CPU without SIMD computes.
 *
 * Levels are per CPU architecture (x86-64: AVX2, AVX512; aarch64: NEON) and one
 * build has the levels of one architecture only, so "higher enum value" is "better".
 * Extensions (isa_has) are what a variant needs beyond its level (VNNI for qdot's
 * avx512 kernels, the dot-product instructions for neon_dotprod, AMX tiles); each is
 * only ever true together with its level. A GPU backend is another axis (which device
 * runs an op), not a level here; it would sit beside this, not in it.
 */
#ifndef EDDY_BASE_ISA_H
#define EDDY_BASE_ISA_H

#include <stdbool.h>

typedef enum {
    ISA_REF = 0, /* portable C, no SIMD: always available */
    ISA_AVX2,    /* x86-64: AVX2 + FMA + F16C (Haswell) */
    ISA_AVX512,  /* x86-64: the AVX2 level + AVX-512 F/BW/VL/DQ (Skylake-X) */
    ISA_NEON,    /* aarch64: Advanced SIMD */
    ISA_COUNT
} isa_level;

typedef enum {
    ISA_EXT_AVX512VNNI, /* on ISA_AVX512: vpdpbusd / vpdpwssd */
    ISA_EXT_AMX_BF16,   /* on ISA_AVX512: AMX tiles with bf16 products, granted to this process */
    ISA_EXT_DOTPROD,    /* on ISA_NEON: sdot / udot */
    ISA_EXT_COUNT
} isa_ext;

/* The level every dispatcher uses. */
isa_level isa_active(void);

/* True when this build has the level's kernels and isa_active() is at least it:
 * ISA_REF always; under EDDY_FORCE_REF=1 only ISA_REF. Tests and benchmarks run
 * each level for which this holds. */
bool isa_available(isa_level isa);

/* True when the extension's level is available and the CPU has the extension. */
bool isa_has(isa_ext ext);

/* "ref", "avx2", "avx512", "neon" ("?" outside the enum). */
const char *isa_name(isa_level isa);

#endif
