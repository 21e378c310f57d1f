/*
 * cpu.h — run-time CPU feature detection.
 *
 * Kernels do not read these flags: base/isa.h turns them into the one ISA level
 * every dispatcher uses. Setting EDDY_FORCE_REF=1 in the environment clears every
 * flag, which leaves that level at ISA_REF (portable C); EDDY_CPU_OFF=amx,... clears
 * the ones it names (cpu_turn_off).
 *
 * Also owns how many CPUs this process may use (its affinity mask and its cgroup's
 * CPU quota), which sets the default thread count.
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

/* Turns off in *c the features a comma-separated list names (EDDY_CPU_OFF), and what
 * needs them: "amx"; "vnni" (avx512vnni, avxvnni); "avx512" (all AVX-512, AMX);
 * "avx2" (every x86 feature); "dotprod"; "neon" (every aarch64 feature). So a CPU with
 * AMX can run, and be measured, as one without it. Returns false, having applied the
 * names it knows, when a name is unknown. */
bool cpu_turn_off(cpu_caps *c, const char *names);

/* Convenience for dispatch: AVX2 with FMA and F16C (the Haswell baseline). */
static inline bool cpu_has_avx2(const cpu_caps *c) { return c->avx2 && c->fma && c->f16c; }
/* AVX-512 F+BW+VL+DQ (Skylake-X baseline). */
static inline bool cpu_has_avx512(const cpu_caps *c) {
    return c->avx512f && c->avx512bw && c->avx512vl && c->avx512dq;
}

/* ==== CPUs this process may use ==== */

/* The CPUs the calling thread may run on (sched_getaffinity, so taskset and cpusets
 * count), or the online CPUs where the mask cannot be read; at least 1. */
int cpu_affinity_count(void);

/* The CPU time quota of this process's cgroup in whole CPUs, rounded up, or 0 when
 * there is none: cgroup v2 `cpu.max`, else v1 `cpu.cfs_quota_us / cpu.cfs_period_us`,
 * of its cgroup and every ancestor (the tightest wins). root: where the cgroup file
 * systems are mounted ("/sys/fs/cgroup"); self: the text of /proc/self/cgroup. */
int cpu_quota_count(const char *root, const char *self);

/* "QUOTA PERIOD" (a cgroup v2 cpu.max) as whole CPUs rounded up; 0 for "max ..." or
 * anything unreadable. */
int cpu_parse_cpu_max(const char *text);

/* The CPUs this process may use: the affinity count, lowered to the cgroup quota
 * when there is one; at least 1. The default thread count. */
int cpu_usable_count(void);

#endif
