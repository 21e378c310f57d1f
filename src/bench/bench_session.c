/*
 * bench_session.c — `eddy bench -m --session-turn`: what a session file and the prefix
 * cache save on the next turn of a long conversation, against evaluating it again,
 * and the session load's read speed against the disk's, measured in the same run.
 *
 * Owns: the three timings of eddy_bench_session, dropping a file's pages from the
 * page cache (fsync, then posix_fadvise DONTNEED) so loads read the disk, and the
 * cold sequential read of a same-sized file.
 * Does not own: the session format (src/state/session.c) or the output (cli/cmd_bench.c).
 */
#define _POSIX_C_SOURCE 200809L
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/error.h"
#include "base/timer.h"
#include "bench.h"

/* Drops path's pages from the page cache (after writing them out). */
static void drop_cached(const char *path) {
    int fd = open(path, O_RDONLY);
    if (fd < 0) return;
    fdatasync(fd);
    posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    close(fd);
}

/* Bytes/s of reading path start to end in 4 MiB reads, cold. */
static double read_speed(const char *path) {
    drop_cached(path);
    int fd = open(path, O_RDONLY);
    if (fd < 0) return 0;
    const size_t chunk = (size_t)4 << 20;
    char *buf = eddy_malloc(chunk);
    double t0 = timer_s(), total = 0;
    ssize_t got;
    while (buf && (got = read(fd, buf, chunk)) > 0) total += (double)got;
    const double dt = timer_s() - t0;
    eddy_free(buf);
    close(fd);
    return dt > 0 ? total / dt : 0;
}

/* A file of n bytes (not zeros, so nothing can skip them) at path. */
static bool write_filler(const char *path, double n) {
    FILE *f = fopen(path, "wb");
    if (!f) return false;
    char block[65536];
    for (size_t i = 0; i < sizeof block; i++) block[i] = (char)(i * 131 + 7);
    for (double done = 0; done < n; done += sizeof block)
        if (fwrite(block, 1, sizeof block, f) != sizeof block) break;
    return fclose(f) == 0;
}

static double best(double a, double b) { return a < b ? a : b; }

eddy_status eddy_bench_session(const eddy_model *m, const eddy_bench_params *p, const char *dir,
                               eddy_bench_session_result *r, eddy_error *err) {
    if (!m || !p || !dir || !r) return eddy_error_set(err, EDDY_ERR_ARG, "eddy_bench_session: NULL argument");
    if (p->n_prompt < 1 || p->n_gen < 1 || p->n_prompt + p->n_gen > ((int64_t)1 << 20))
        return eddy_error_set(err, EDDY_ERR_ARG, "bench: a conversation of %" PRId64 " tokens and a turn of %" PRId64
                              " needs both at least 1", p->n_prompt, p->n_gen);
    const int reps = p->n_reps > 0 ? p->n_reps : 3;
    const int64_t n = p->n_prompt + p->n_gen, V = eddy_model_n_vocab(m);
    /* checkpoints at the conversation's end: cache_every must divide n_prompt; put does it */
    eddy_engine_params ep = {.n_ctx = n, .n_seq_max = 2, .n_threads = p->n_threads, .cache_bytes = (size_t)4 << 30,
                             .n_batch = p->n_batch, .device = p->device, .gpu_layers = p->gpu_layers,
                             .cache_fit = true};
    eddy_engine *e = NULL;
    eddy_status st = eddy_engine_new(m, &ep, &e, err);
    if (st != EDDY_OK) return st;
    char path[4096], filler[4096];
    snprintf(path, sizeof path, "%s/eddy-bench-%ld.session", dir, (long)getpid());
    snprintf(filler, sizeof filler, "%s/eddy-bench-%ld.filler", dir, (long)getpid());
    int32_t *ids = eddy_malloc((size_t)n * sizeof *ids);
    float *logits = eddy_malloc((size_t)V * sizeof *logits);
    eddy_seq *a = NULL, *b = NULL;
    if (!ids || !logits) st = eddy_error_set(err, EDDY_ERR_NOMEM, "out of memory");
    if (st == EDDY_OK) st = eddy_seq_new(e, &a, err);
    if (st == EDDY_OK) st = eddy_seq_new(e, &b, err);
    uint64_t rng = p->seed * 0x9e3779b97f4a7c15ull + 3;
    for (int64_t i = 0; st == EDDY_OK && i < n; i++) ids[i] = bench_random_token(&rng, V, NULL);
    *r = (eddy_bench_session_result){.n_prompt = p->n_prompt, .n_turn = p->n_gen, .t_reprocess = 1e30,
                                     .t_load = 1e30, .t_file_turn = 1e30, .t_cache_turn = 1e30, .t_save = 1e30};
    snprintf(r->device, sizeof r->device, "%s", eddy_engine_device_name(e));
    for (int rep = 0; rep <= reps && st == EDDY_OK; rep++) { /* rep 0: warm-up */
        double t0 = timer_s();
        eddy_seq_clear(a);
        st = eddy_seq_eval(a, ids, n, logits, 0, err);
        const double t_all = timer_s() - t0;
        /* the conversation alone, saved and cached */
        eddy_seq_clear(a);
        if (st == EDDY_OK) st = eddy_seq_eval(a, ids, p->n_prompt, logits, 0, err);
        if (st == EDDY_OK) st = eddy_seq_cache_put(a, err);
        t0 = timer_s();
        if (st == EDDY_OK) st = eddy_seq_save(a, NULL, path, err);
        const double t_save = timer_s() - t0;
        drop_cached(path);
        t0 = timer_s();
        eddy_seq_clear(b);
        if (st == EDDY_OK) st = eddy_seq_load(b, NULL, path, err);
        const double t_load = timer_s() - t0;
        if (st == EDDY_OK) st = eddy_seq_eval(b, ids + p->n_prompt, p->n_gen, logits, 0, err);
        const double t_file = timer_s() - t0;
        t0 = timer_s();
        eddy_seq_clear(b);
        int64_t held = 0;
        if (st == EDDY_OK) st = eddy_seq_restore_prefix(b, ids, n, &held, err);
        if (st == EDDY_OK && held != p->n_prompt)
            st = eddy_error_set(err, EDDY_ERR_ARG, "bench: the cache restored %" PRId64 " of %" PRId64 " tokens", held,
                                p->n_prompt);
        if (st == EDDY_OK) st = eddy_seq_eval(b, ids + held, n - held, logits, 0, err);
        const double t_cache = timer_s() - t0;
        if (rep == 0 || st != EDDY_OK) continue;
        r->t_reprocess = best(r->t_reprocess, t_all);
        r->t_save = best(r->t_save, t_save);
        r->t_load = best(r->t_load, t_load);
        r->t_file_turn = best(r->t_file_turn, t_file);
        r->t_cache_turn = best(r->t_cache_turn, t_cache);
    }
    if (st == EDDY_OK) {
        struct stat sb;
        r->file_bytes = stat(path, &sb) == 0 ? (double)sb.st_size : 0;
        if (!write_filler(filler, r->file_bytes)) {
            st = eddy_error_set(err, EDDY_ERR_IO, "%s: cannot write the disk probe file", filler);
        } else {
            for (int i = 0; i < 3; i++) {
                const double bps = read_speed(filler);
                if (bps > r->disk_read_bps) r->disk_read_bps = bps;
            }
        }
    }
    unlink(path);
    unlink(filler);
    eddy_engine_free(e);
    eddy_free(ids);
    eddy_free(logits);
    return st;
}
