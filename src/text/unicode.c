/*
 * unicode.c — strict UTF-8, the class table, and NFC normalization.
 *
 * Owns: the code of unicode.h. The data lives in unicode_data.c (generated); the
 * flat class table (one byte per code point, 1.1 MB of static storage) is
 * expanded from its ranges once per process, on first use.
 */
#include "text/unicode.h"

#include <pthread.h>
#include <string.h>

#include "base/alloc.h"
#include "base/error.h"

/* ==== UTF-8 ==== */

int utf8_decode(const uint8_t *s, size_t n, uint32_t *cp) {
    uint8_t b0 = s[0];
    if (b0 < 0x80) {
        *cp = b0;
        return 1;
    }
    int len;
    uint32_t v;
    uint8_t lo = 0x80, hi = 0xBF; /* allowed range of the second byte */
    if (b0 >= 0xC2 && b0 <= 0xDF) len = 2, v = b0 & 0x1F;
    else if (b0 >= 0xE0 && b0 <= 0xEF) {
        len = 3, v = b0 & 0x0F;
        if (b0 == 0xE0) lo = 0xA0;      /* no overlongs */
        else if (b0 == 0xED) hi = 0x9F; /* no surrogates */
    } else if (b0 >= 0xF0 && b0 <= 0xF4) {
        len = 4, v = b0 & 0x07;
        if (b0 == 0xF0) lo = 0x90;
        else if (b0 == 0xF4) hi = 0x8F; /* <= U+10FFFF */
    } else
        return -1;
    for (int i = 1; i < len; i++) {
        if ((size_t)i >= n) return -i;
        uint8_t b = s[i];
        if (i == 1 ? (b < lo || b > hi) : (b & 0xC0) != 0x80) return -i;
        v = (v << 6) | (b & 0x3F);
    }
    *cp = v;
    return len;
}

int utf8_encode(uint32_t cp, uint8_t *out) {
    if (cp < 0x80) {
        out[0] = (uint8_t)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (uint8_t)(0xC0 | (cp >> 6));
        out[1] = (uint8_t)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (uint8_t)(0xE0 | (cp >> 12));
        out[1] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (uint8_t)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (uint8_t)(0xF0 | (cp >> 18));
    out[1] = (uint8_t)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (uint8_t)(0x80 | (cp & 0x3F));
    return 4;
}

size_t utf8_valid_prefix(const uint8_t *s, size_t n, bool *tail_incomplete) {
    size_t i = 0;
    *tail_incomplete = false;
    while (i < n) {
        if (s[i] < 0x80) {
            i++;
            continue;
        }
        uint32_t cp;
        int k = utf8_decode(s + i, n - i, &cp);
        if (k > 0) {
            i += (size_t)k;
            continue;
        }
        /* invalid here: incomplete only if a valid lead's subpart runs to the end */
        *tail_incomplete = i + (size_t)(-k) == n && s[i] >= 0xC2 && s[i] <= 0xF4;
        break;
    }
    return i;
}

/* ==== Class table ==== */

/* One byte of UCLASS_* flags per code point, in static storage (no allocation):
 * filled from the ranges once per process. */
static uint8_t flat_table[UNI_MAX_CP + 1];
static pthread_once_t flat_once = PTHREAD_ONCE_INIT;

static void build_flat(void) {
    for (int64_t i = 0; i < uni_n_ranges; i++)
        memset(flat_table + uni_ranges[i].first, (int)uni_ranges[i].flags,
               uni_ranges[i].last - uni_ranges[i].first + 1);
}

const uint8_t *uni_flag_table(void) {
    pthread_once(&flat_once, build_flat);
    return flat_table;
}

/* ==== Lookups ==== */

uint32_t uni_ccc_of(uint32_t cp) {
    if (cp < 0x300) return 0;
    int64_t lo = 0, hi = uni_n_ccc - 1;
    while (lo <= hi) {
        int64_t mid = (lo + hi) / 2;
        if (uni_ccc_table[mid].cp == cp) return uni_ccc_table[mid].ccc;
        if (uni_ccc_table[mid].cp < cp) lo = mid + 1;
        else hi = mid - 1;
    }
    return 0;
}

static const uni_decomp *find_decomp(uint32_t cp) {
    int64_t lo = 0, hi = uni_n_decomp - 1;
    while (lo <= hi) {
        int64_t mid = (lo + hi) / 2;
        if (uni_decomp_table[mid].cp == cp) return &uni_decomp_table[mid];
        if (uni_decomp_table[mid].cp < cp) lo = mid + 1;
        else hi = mid - 1;
    }
    return NULL;
}

/* Hangul syllables (Unicode 3.12): algorithmic (de)composition. */
enum {
    HS_BASE = 0xAC00, HL_BASE = 0x1100, HV_BASE = 0x1161, HT_BASE = 0x11A7,
    HL_COUNT = 19, HV_COUNT = 21, HT_COUNT = 28, HN_COUNT = HV_COUNT * HT_COUNT,
    HS_COUNT = HL_COUNT * HN_COUNT,
};

static uint32_t compose_pair(uint32_t a, uint32_t b) {
    if (a >= HL_BASE && a < HL_BASE + HL_COUNT && b >= HV_BASE && b < HV_BASE + HV_COUNT)
        return HS_BASE + ((a - HL_BASE) * HV_COUNT + (b - HV_BASE)) * HT_COUNT;
    if (a >= HS_BASE && a < HS_BASE + HS_COUNT && (a - HS_BASE) % HT_COUNT == 0 && b > HT_BASE &&
        b < HT_BASE + HT_COUNT)
        return a + (b - HT_BASE);
    int64_t lo = 0, hi = uni_n_comp - 1;
    while (lo <= hi) {
        int64_t mid = (lo + hi) / 2;
        const uni_comp *c = &uni_comp_table[mid];
        if (c->first == a && c->second == b) return c->composite;
        if (c->first < a || (c->first == a && c->second < b)) lo = mid + 1;
        else hi = mid - 1;
    }
    return 0;
}

/* ==== NFC ==== */

bool uni_is_nfc_quick(const uint8_t *table, const uint8_t *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        if (s[i] < 0x80) {
            i++;
            continue;
        }
        uint32_t cp;
        int k = utf8_decode(s + i, n - i, &cp);
        EDDY_ASSERT(k > 0); /* callers pass valid UTF-8 only */
        if (!(uni_flags_in(table, cp) & UCLASS_NFC_SAFE)) return false;
        i += (size_t)k;
    }
    return true;
}

static bool cpbuf_push(uni_cpbuf *b, uint32_t cp) {
    if (b->n == b->cap) {
        int64_t cap = b->cap ? b->cap * 2 : 256;
        uint32_t *p = eddy_realloc(b->cp, (size_t)cap * sizeof *p);
        if (!p) return false;
        b->cp = p;
        b->cap = cap;
    }
    b->cp[b->n++] = cp;
    return true;
}

void uni_cpbuf_free(uni_cpbuf *b) {
    eddy_free(b->cp);
    b->cp = NULL;
    b->n = b->cap = 0;
}

bool uni_nfc(const uint8_t *s, size_t n, uint8_t **out, size_t *out_n, size_t *out_cap,
             uni_cpbuf *work) {
    /* 1. full canonical decomposition */
    work->n = 0;
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        int k = utf8_decode(s + i, n - i, &cp);
        EDDY_ASSERT(k > 0);
        i += (size_t)k;
        if (cp >= HS_BASE && cp < HS_BASE + HS_COUNT) {
            uint32_t si = cp - HS_BASE;
            if (!cpbuf_push(work, HL_BASE + si / HN_COUNT)) return false;
            if (!cpbuf_push(work, HV_BASE + (si % HN_COUNT) / HT_COUNT)) return false;
            if (si % HT_COUNT && !cpbuf_push(work, HT_BASE + si % HT_COUNT)) return false;
            continue;
        }
        const uni_decomp *d = cp >= 0xC0 ? find_decomp(cp) : NULL;
        if (!d) {
            if (!cpbuf_push(work, cp)) return false;
            continue;
        }
        for (uint32_t j = 0; j < d->len; j++)
            if (!cpbuf_push(work, uni_decomp_pool[d->off + j])) return false;
    }
    /* 2. canonical ordering: stable sort of every run of non-zero classes */
    uint32_t *c = work->cp;
    int64_t m = work->n;
    for (int64_t i = 1; i < m; i++) {
        uint32_t cc = uni_ccc_of(c[i]);
        if (cc == 0) continue;
        uint32_t x = c[i];
        int64_t j = i;
        while (j > 0) {
            uint32_t pc = uni_ccc_of(c[j - 1]);
            if (pc <= cc) break; /* pc == 0 stops too */
            c[j] = c[j - 1];
            j--;
        }
        c[j] = x;
    }
    /* 3. canonical composition, in place */
    int64_t o = 0, starter = -1;
    uint32_t prev_cc = 0;
    for (int64_t i = 0; i < m; i++) {
        uint32_t x = c[i], cc = uni_ccc_of(x);
        if (starter >= 0) {
            bool adjacent = o - 1 == starter;
            if (adjacent || (prev_cc != 0 && prev_cc < cc)) {
                uint32_t comp = compose_pair(c[starter], x);
                if (comp) {
                    c[starter] = comp;
                    continue;
                }
            }
        }
        if (cc == 0) starter = o;
        c[o++] = x;
        prev_cc = cc;
    }
    /* 4. back to UTF-8 */
    size_t need = (size_t)o * 4;
    if (*out_cap < need) {
        uint8_t *p = eddy_realloc(*out, need);
        if (!p) return false;
        *out = p;
        *out_cap = need;
    }
    size_t len = 0;
    for (int64_t i = 0; i < o; i++) len += (size_t)utf8_encode(c[i], *out + len);
    *out_n = len;
    return true;
}
