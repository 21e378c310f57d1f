/*
 * with_sockets.c — a user's program that links libeddy and also uses POSIX sockets,
 * built by tests/lib/run.sh against libeddy.a, libeddy.so and an installed copy.
 *
 * It checks that the library's internal names cannot meet a program's: it calls
 * socket() and bind() (the model loader once had a global function named bind, and
 * the program's call landed in it), and it defines functions of its own named like
 * eddy internals (forward, matmul, linear, gguf_find_key) that the library must not
 * call, nor clash with at link time. Prints "ok" and exits 0 when both the model
 * and the socket work.
 *
 * usage: with_sockets MODEL.gguf SOCKET_PATH
 */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "eddy.h"

/* ==== The program's own functions, named like library internals ==== */

/* Each aborts: reaching one from inside libeddy means the library called the
 * program's function instead of its own. */
int forward(void *ctx, int n);
int matmul(int a, int b);
int linear(int a);
const char *gguf_find_key(const char *key);

int forward(void *ctx, int n) { (void)ctx; (void)n; fprintf(stderr, "libeddy called the program's forward()\n"); abort(); }
int matmul(int a, int b) { (void)a; (void)b; fprintf(stderr, "libeddy called the program's matmul()\n"); abort(); }
int linear(int a) { (void)a; fprintf(stderr, "libeddy called the program's linear()\n"); abort(); }
const char *gguf_find_key(const char *key) { (void)key; fprintf(stderr, "libeddy called the program's gguf_find_key()\n"); abort(); }

/* ==== main ==== */

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s MODEL.gguf SOCKET_PATH\n", argv[0]);
        return 2;
    }

    // the library: loading a model reads keys and binds its tensors
    eddy_error err;
    eddy_model *m = NULL;
    if (eddy_model_load(argv[1], &m, &err) != EDDY_OK) {
        fprintf(stderr, "eddy_model_load: %s\n", err.msg);
        return 1;
    }
    printf("eddy %s: %s model, %lld tokens\n", eddy_version(), eddy_model_arch(m), (long long)eddy_model_n_vocab(m));

    // a Unix socket bound to a path: POSIX socket(), bind(), listen()
    struct sockaddr_un addr;
    memset(&addr, 0, sizeof addr);
    addr.sun_family = AF_UNIX;
    if (strlen(argv[2]) >= sizeof addr.sun_path) {
        fprintf(stderr, "socket path too long: %s\n", argv[2]);
        return 2;
    }
    strcpy(addr.sun_path, argv[2]);
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    if (fd < 0) {
        perror("socket");
        return 1;
    }
    if (bind(fd, (const struct sockaddr *)&addr, sizeof addr) != 0) {
        perror("bind");
        return 1;
    }
    if (listen(fd, 1) != 0) {
        perror("listen");
        return 1;
    }
    close(fd);
    unlink(argv[2]);

    eddy_model_free(m);
    printf("ok\n");
    return 0;
}
