/*
 * mapfile.c — mmap a file read-only, falling back to read() into memory.
 */
#define _DEFAULT_SOURCE /* madvise */
#define _POSIX_C_SOURCE 200809L
#include "mapfile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#if defined(__linux__) && !defined(MADV_POPULATE_WRITE)
#define MADV_POPULATE_WRITE 23
#endif

#include "alloc.h"
#include "env.h"

static eddy_status read_whole(int fd, const char *path, uint64_t size, mapfile *m,
                              eddy_error *err) {
    if (size > (uint64_t)SIZE_MAX)
        return eddy_error_set(err, EDDY_ERR_NOMEM, "%s: file too large to read into memory", path);
    uint8_t *buf = eddy_malloc((size_t)size);
    if (!buf)
        return eddy_error_set(err, EDDY_ERR_NOMEM, "%s: cannot allocate %llu bytes", path,
                              (unsigned long long)size);
    uint64_t done = 0;
    while (done < size) {
        size_t want = (size - done) > (1u << 30) ? (1u << 30) : (size_t)(size - done);
        ssize_t got = read(fd, buf + done, want);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) {
            eddy_free(buf);
            return eddy_error_set(err, EDDY_ERR_IO, "%s: read failed at byte %llu: %s", path,
                                  (unsigned long long)done,
                                  got < 0 ? strerror(errno) : "unexpected end of file");
        }
        done += (uint64_t)got;
    }
    m->data = buf;
    m->size = size;
    m->mapped = false;
    return EDDY_OK;
}

eddy_status mapfile_open(mapfile *m, const char *path, bool allow_mmap, eddy_error *err) {
    memset(m, 0, sizeof *m);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return eddy_error_set(err, EDDY_ERR_IO, "%s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return eddy_error_set(err, EDDY_ERR_IO, "%s: %s", path, strerror(e));
    }
    if (S_ISDIR(st.st_mode)) {
        close(fd);
        return eddy_error_set(err, EDDY_ERR_IO, "%s: is a directory", path);
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return eddy_error_set(err, EDDY_ERR_IO, "%s: not a regular file", path);
    }
    uint64_t size = (uint64_t)st.st_size;
    eddy_status s = EDDY_OK;
    if (size == 0) {
        m->data = NULL;
        m->size = 0;
    } else {
        bool try_map = allow_mmap && !env_flag("EDDY_NO_MMAP");
        void *p = MAP_FAILED;
        if (try_map && size <= (uint64_t)SIZE_MAX)
            p = mmap(NULL, (size_t)size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p != MAP_FAILED) {
            m->data = p;
            m->size = size;
            m->mapped = true;
        } else {
            s = read_whole(fd, path, size, m, err);
        }
    }
    close(fd);
    return s;
}

void mapfile_close(mapfile *m) {
    if (m->data) {
        if (m->mapped)
            munmap((void *)m->data, (size_t)m->size);
        else
            eddy_free((void *)m->data);
    }
    memset(m, 0, sizeof *m);
}

void mem_populate_write(void *p, size_t n) {
#ifdef MADV_POPULATE_WRITE
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE), a = (uintptr_t)p & ~(page - 1);
    if (n) madvise((void *)a, ((uintptr_t)p + n - a + page - 1) & ~(page - 1), MADV_POPULATE_WRITE);
#else
    (void)p, (void)n;
#endif
}
