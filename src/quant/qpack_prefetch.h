/*
 * qpack_prefetch.h — software prefetch of the packed weights a kernel streams from memory
 * (decode, verify steps, small batches), shared by the AVX2, AVX-512 and NEON kernels.
 *
 * Each unit prefetches the bytes QPACK_PF_BYTES ahead of it (QPACK_PF_KQ_BYTES for the
 * K-quants: the next units', or past the end of the group, which a thread's next call
 * reads): the out-of-order window alone keeps too few misses in flight. A K-quant unit (2.2–3.3 KiB) does it in eight parts, one per
 * sub-block loop iteration: 35–53 prefetches at the start of a unit fill the core's miss
 * buffers at once, the unit's own loads queue behind them, and for the rest of the unit no
 * miss is in flight (Q6_K decode streamed at 8–9 GB/s on two Zen 4 cores that way, 22–27
 * GB/s in parts).
 */
#ifndef EDDY_QPACK_PREFETCH_H
#define EDDY_QPACK_PREFETCH_H

#include <stddef.h>
#include <stdint.h>

#define QPACK_PF_BYTES 4096
/* K-quant units are 4–6 times larger and take longer to compute: their parts prefetch
 * twice as far ahead (single-thread Q6_K decode 17 -> 21 GB/s, Q4_K 19–24 -> 22–29 GB/s
 * on a Zen 4 core; 32-element formats were slower at that distance) */
#define QPACK_PF_KQ_BYTES 8192

/* all of a unit's bytes, ahead */
static inline __attribute__((always_inline)) void qpack_prefetch_unit(const uint8_t *w, size_t bytes) {
    for (size_t o = 0; o < bytes; o += 64) __builtin_prefetch(w + QPACK_PF_BYTES + o, 0, 3);
}

/* part 0..7 of a K-quant unit's lines, ahead */
static inline __attribute__((always_inline)) void qpack_prefetch_part(const uint8_t *w, size_t bytes, int part) {
    const size_t lines = (bytes + 63) / 64, per = (lines + 7) / 8;
    for (size_t l = (size_t)part * per; l < lines && l < (size_t)(part + 1) * per; l++)
        __builtin_prefetch(w + QPACK_PF_KQ_BYTES + 64 * l, 0, 3);
}

#endif
