/*
 * mapfile.h — a whole file, read-only, in memory.
 *
 * Owns: opening a file and mapping it with mmap, or reading it into an allocated
 * buffer where mmap is unavailable (or refused by the caller). Does not own: any
 * interpretation of the bytes.
 */
#ifndef EDDY_BASE_MAPFILE_H
#define EDDY_BASE_MAPFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"

typedef struct {
    const uint8_t *data; /* size bytes; NULL when size == 0 */
    uint64_t size;
    bool mapped;         /* true: munmap on close; false: eddy_free */
} mapfile;

/* Opens path. With allow_mmap false (or $EDDY_NO_MMAP set) the file is read into
 * memory instead of mapped. */
eddy_status mapfile_open(mapfile *m, const char *path, bool allow_mmap, eddy_error *err);
void mapfile_close(mapfile *m);

/* Asks the kernel to give [p, p + n) its pages for writing now (whole pages around the
 * range), so a later write takes no page faults: one call instead of one fault per
 * 4 KiB, and it can run on another thread while this one waits for a disk. Contents
 * are unchanged. Linux 5.14 and later; elsewhere it does nothing. */
void mem_populate_write(void *p, size_t n);

#endif
