/*
 * cmd_bench.c — `eddy bench`: benchmarks.
 *
 *   eddy bench --kernels [--json] [-t THREADS] [--filter NAME]
 */
#include <stdio.h>
#include <string.h>

#include "cli.h"

int cmd_bench(int argc, char **argv) {
    int kernels = 0, json = 0;
    long long threads = 0;
    const char *filter = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--kernels")) kernels = 1;
        else if (!strcmp(a, "--json")) json = 1;
        else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) {
            if (cli_parse_int(a, i + 1 < argc ? argv[++i] : NULL, 1, 1024, &threads)) return 1;
        } else if (!strcmp(a, "--filter")) {
            if (++i >= argc) return cli_error("--filter needs a benchmark name");
            filter = argv[i];
        } else if (!strcmp(a, "-m") || !strcmp(a, "--model")) {
            return cli_error("bench: model benchmarks (-m) need the model runner, which eddy does not have yet; "
                             "use --kernels");
        } else {
            return cli_error("bench: unknown option \"%s\"", a);
        }
    }
    if (!kernels) return cli_error("bench: nothing to run (use --kernels)");
    if (threads == 0) threads = 2;
    eddy_error err;
    if (eddy_bench_kernels(filter, (int)threads, json, &err) != EDDY_OK) return cli_error("%s", err.msg);
    return 0;
}
