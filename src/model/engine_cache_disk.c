/*
 * engine_cache_disk.c — the prefix cache's disk tier: states that leave the memory
 * budget, and those still cached when the engine is freed, are written to files in a
 * directory, and a later lookup — in this engine or in the next process on the same
 * model — can restore them from there.
 *
 * Owns: the index of the directory's files of this model (name, positions, bytes, last
 * use), writing an entry's file (the session format, atomically), removing the least
 * recently used files when the disk budget needs room, and loading the deepest file
 * that begins a prompt.
 * Does not own: the format (src/state/session.c, which checks a file whole before it
 * changes anything) or the memory tier (engine_cache.c).
 *
 * A file is DIR/<model fingerprint, 32 hex>-<XXH3-64 of its tokens, 16 hex>-<positions>.eddy;
 * files of other models, and other files, are left alone. A file that fails to load
 * (damaged, truncated) is removed; the tokens inside are compared with the prompt's
 * before anything is restored, so a hash collision restores nothing.
 */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "base/alloc.h"
#include "base/error.h"
#include "base/log.h"
#include "model/engine.h"

static void file_name(const engine *c, uint64_t hash, int64_t n_pos, char *out, size_t n) {
    snprintf(out, n, "%s/%s-%016" PRIx64 "-%" PRId64 ".eddy", c->cache_dir, c->cache_fp, hash, n_pos);
}

static disk_entry *find(engine *c, uint64_t hash, int64_t n_pos) {
    for (int64_t i = 0; i < c->n_disk; i++)
        if (c->disk[i].hash == hash && c->disk[i].n_pos == n_pos) return &c->disk[i];
    return NULL;
}

static bool add(engine *c, disk_entry e) {
    if (c->n_disk == c->disk_cap) {
        const int64_t cap = c->disk_cap ? 2 * c->disk_cap : 16;
        disk_entry *bigger = eddy_realloc(c->disk, (size_t)cap * sizeof *bigger);
        if (!bigger) return false;
        c->disk = bigger, c->disk_cap = cap;
    }
    c->disk[c->n_disk++] = e;
    c->disk_used += e.bytes;
    return true;
}

/* Forgets entry i; removes its file too when asked. */
static void forget(engine *c, int64_t i, bool remove) {
    if (remove) {
        char path[4200];
        file_name(c, c->disk[i].hash, c->disk[i].n_pos, path, sizeof path);
        unlink(path);
    }
    c->disk_used -= c->disk[i].bytes;
    c->disk[i] = c->disk[--c->n_disk];
}

/* ==== Life ==== */

eddy_status cache_disk_init(engine *c, const char *dir, size_t budget, eddy_error *err) {
    if (strlen(dir) == 0 || strlen(dir) > 4000) return eddy_error_set(err, EDDY_ERR_ARG, "cache directory: bad name");
    if (mkdir(dir, 0777) != 0 && errno != EEXIST)
        return eddy_error_set(err, EDDY_ERR_IO, "cache directory %s: cannot create it: %s", dir, strerror(errno));
    DIR *d = opendir(dir);
    if (!d) return eddy_error_set(err, EDDY_ERR_IO, "cache directory %s: cannot read it: %s", dir, strerror(errno));
    c->cache_dir = eddy_malloc(strlen(dir) + 1);
    if (!c->cache_dir) {
        closedir(d);
        return eddy_error_set(err, EDDY_ERR_NOMEM, "out of memory");
    }
    strcpy(c->cache_dir, dir);
    session_fingerprint_hex(c->m, c->mtp, c->cache_fp);
    c->disk_budget = budget;
    /* this model's files, oldest first by modification time, as the starting order of use */
    struct dirent *de;
    typedef struct {
        disk_entry e;
        double mtime;
    } found;
    found *list = NULL;
    int64_t n = 0, cap = 0;
    while ((de = readdir(d))) {
        char fp[33];
        uint64_t hash;
        long long n_pos;
        int used = 0;
        if (sscanf(de->d_name, "%32[0-9a-f]-%16" SCNx64 "-%lld.eddy%n", fp, &hash, &n_pos, &used) != 3 ||
            de->d_name[used] != '\0' || strcmp(fp, c->cache_fp) != 0 || n_pos <= 0 || n_pos > c->n_ctx)
            continue;
        char path[4200];
        struct stat sb;
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        if (stat(path, &sb) != 0 || !S_ISREG(sb.st_mode)) continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 16;
            found *bigger = eddy_realloc(list, (size_t)cap * sizeof *bigger);
            if (!bigger) break;
            list = bigger;
        }
        list[n++] = (found){{hash, (int64_t)n_pos, (size_t)sb.st_size, 0}, (double)sb.st_mtime};
    }
    closedir(d);
    for (int64_t i = 1; i < n; i++) /* insertion sort by mtime: a directory holds few */
        for (int64_t j = i; j > 0 && list[j].mtime < list[j - 1].mtime; j--) {
            found t = list[j];
            list[j] = list[j - 1], list[j - 1] = t;
        }
    for (int64_t i = 0; i < n; i++) {
        list[i].e.last_use = ++c->cache_clock;
        if (!add(c, list[i].e)) break;
    }
    eddy_free(list);
    eddy_log(EDDY_LOG_INFO, "prefix cache: %" PRId64 " files of this model in %s (%.1f MiB)", c->n_disk, dir,
             (double)c->disk_used / (1 << 20));
    return EDDY_OK;
}

void cache_disk_free(engine *c) {
    eddy_free(c->disk);
    eddy_free(c->cache_dir);
    c->disk = NULL, c->cache_dir = NULL, c->n_disk = c->disk_cap = 0;
}

/* ==== Writing ==== */

bool cache_disk_spill(engine *c, const seq_state *st, uint64_t hash) {
    if (!c->cache_dir || st->n_pos <= 0) return false;
    disk_entry *have = find(c, hash, st->n_pos);
    if (have) {
        have->last_use = ++c->cache_clock;
        return true;
    }
    uint8_t *buf;
    size_t len;
    eddy_error err;
    if (session_serialize_entry(c, st, &buf, &len, &err) != EDDY_OK) return false;
    bool ok = c->disk_budget == 0 || len <= c->disk_budget;
    while (ok && c->disk_budget && c->disk_used + len > c->disk_budget && c->n_disk > 0) {
        int64_t oldest = 0;
        for (int64_t i = 1; i < c->n_disk; i++)
            if (c->disk[i].last_use < c->disk[oldest].last_use) oldest = i;
        forget(c, oldest, true);
    }
    char path[4200];
    file_name(c, hash, st->n_pos, path, sizeof path);
    if (ok && session_write_atomic(path, buf, len, &err) != EDDY_OK) {
        eddy_log(EDDY_LOG_WARN, "prefix cache: %s", err.msg);
        ok = false;
    }
    eddy_free(buf);
    if (ok && !add(c, (disk_entry){hash, st->n_pos, len, ++c->cache_clock})) {
        unlink(path);
        ok = false;
    }
    return ok;
}

/* ==== Reading ==== */

int64_t cache_disk_restore(engine *c, eddy_seq *s, const int32_t *tokens, int64_t limit, int64_t deeper_than) {
    for (;;) {
        int64_t best = -1;
        for (int64_t i = 0; i < c->n_disk; i++) {
            const disk_entry *e = &c->disk[i];
            if (e->n_pos > limit || e->n_pos <= deeper_than || (best >= 0 && e->n_pos <= c->disk[best].n_pos)) continue;
            if (e->hash == XXH3_64bits(tokens, (size_t)e->n_pos * sizeof *tokens)) best = i;
        }
        if (best < 0) return -1;
        char path[4200];
        file_name(c, c->disk[best].hash, c->disk[best].n_pos, path, sizeof path);
        eddy_error err;
        const eddy_status st = session_load_prefix(c, s, path, tokens, c->disk[best].n_pos, &err);
        if (st == EDDY_OK) {
            c->disk[best].last_use = ++c->cache_clock;
            c->disk_hits++;
            return c->disk[best].n_pos;
        }
        eddy_log(EDDY_LOG_WARN, "prefix cache: %s", err.msg);
        forget(c, best, st == EDDY_ERR_FORMAT || st == EDDY_ERR_IO); /* damaged or gone: removed */
    }
}
