/*
 * fuzz_gguf.c — libFuzzer target for the GGUF reader.
 *
 * Feeds arbitrary bytes to gguf_open_memory; when a file opens, walks everything a
 * user of the file would touch (every metadata value formatted as text, every
 * tensor's info, and the first rows of each readable tensor dequantized), so that
 * anything the reader accepted is shown to be safe to use.
 *
 *   make fuzz FUZZ_SECONDS=600
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "eddy.h"
#include "gguf/gguf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    gguf_file *f;
    eddy_error err;
    if (gguf_open_memory(&f, data, size, "fuzz.gguf", &err) != EDDY_OK) return 0;
    char text[256];
    for (int64_t i = 0; i < eddy_gguf_n_kv(f); i++) {
        eddy_gguf_kv_format(f, i, text, sizeof text, 8);
        (void)eddy_gguf_kv_type_name(f, i);
    }
    (void)gguf_get_int(f, "general.alignment", 0);
    (void)gguf_get_str(f, "general.architecture", NULL);
    for (int64_t i = 0; i < eddy_gguf_n_tensors(f); i++) {
        eddy_tensor_info t;
        eddy_gguf_tensor_info(f, i, &t);
        if (!t.supported || t.n_elements > (1 << 16)) continue;
        float *out = malloc((size_t)t.n_elements * sizeof(float));
        if (out && eddy_gguf_tensor_to_f32(f, i, out, &err) == EDDY_OK) {
            volatile float sink = out[t.n_elements - 1];
            (void)sink;
        }
        free(out);
    }
    gguf_close(f);
    return 0;
}
