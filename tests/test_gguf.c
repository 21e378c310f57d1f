/*
 * test_gguf.c — the GGUF reader: round trips through the writer, every metadata
 * type, the tensor directory, and refusal of damaged files (truncation at every
 * length, each kind of corrupted field, out-of-memory at every allocation, random
 * byte flips).
 */
#define _POSIX_C_SOURCE 200809L
#include "test.h"

#include <stdlib.h>

#include "base/alloc.h"
#include "gguf/gguf.h"
#include "quant/qtypes.h"

/* ==== A sample file ==== */

/* Builds a small file with every scalar type, strings, arrays and three tensors;
 * returns it in a malloc'd buffer. */
static uint8_t *sample_file(uint32_t version, uint32_t alignment, uint64_t *size) {
    gguf_writer *w = gguf_writer_new(version, alignment);
    gguf_writer_add_str(w, "general.architecture", "llama");
    gguf_writer_add_str(w, "general.name", "tiny \"test\"\n");
    if (alignment != GGUF_DEFAULT_ALIGNMENT)
        gguf_writer_add_uint(w, "general.alignment", GGUF_TYPE_UINT32, alignment);
    gguf_writer_add_uint(w, "t.u8", GGUF_TYPE_UINT8, 200);
    gguf_writer_add_int(w, "t.i8", GGUF_TYPE_INT8, -100);
    gguf_writer_add_uint(w, "t.u16", GGUF_TYPE_UINT16, 60000);
    gguf_writer_add_int(w, "t.i16", GGUF_TYPE_INT16, -30000);
    gguf_writer_add_uint(w, "t.u32", GGUF_TYPE_UINT32, 4000000000u);
    gguf_writer_add_int(w, "t.i32", GGUF_TYPE_INT32, -2000000000);
    gguf_writer_add_uint(w, "t.u64", GGUF_TYPE_UINT64, UINT64_MAX);
    gguf_writer_add_int(w, "t.i64", GGUF_TYPE_INT64, INT64_MIN);
    gguf_writer_add_float(w, "t.f32", GGUF_TYPE_FLOAT32, 0.5);
    gguf_writer_add_float(w, "t.f64", GGUF_TYPE_FLOAT64, 1e-300);
    gguf_writer_add_bool(w, "t.bool", true);
    int32_t ints[5] = {1, -2, 3, -4, 5};
    gguf_writer_add_array(w, "t.arr_i32", GGUF_TYPE_INT32, ints, 5);
    float floats[3] = {1.5f, -2.25f, 1e-7f};
    gguf_writer_add_array(w, "t.arr_f32", GGUF_TYPE_FLOAT32, floats, 3);
    const char *strs[4] = {"a", "", "hello world", "\xe4\xbd\xa0\xe5\xa5\xbd"};
    gguf_writer_add_str_array(w, "t.arr_str", strs, 4);
    gguf_writer_add_array(w, "t.empty", GGUF_TYPE_UINT8, NULL, 0);

    float w32[2 * 3] = {1, 2, 3, 4, 5, 6};
    int64_t ne_a[2] = {3, 2};
    gguf_writer_add_tensor(w, "a.weight", QTYPE_F32, 2, ne_a, w32);
    uint8_t q8[2 * 34];
    for (int i = 0; i < (int)sizeof q8; i++) q8[i] = (uint8_t)(i * 13 + 1);
    int64_t ne_b[3] = {32, 1, 2};
    gguf_writer_add_tensor(w, "b.weight", QTYPE_Q8_0, 3, ne_b, q8);
    uint16_t h[5] = {0x3c00, 0x4000, 0xc000, 0, 0x3800};
    int64_t ne_c[1] = {5};
    gguf_writer_add_tensor(w, "c.bias", QTYPE_F16, 1, ne_c, h);

    uint8_t *buf;
    eddy_error err;
    eddy_status s = gguf_writer_finish(w, &buf, size, &err);
    gguf_writer_free(w);
    if (s != EDDY_OK) return NULL;
    uint8_t *copy = malloc(*size);
    memcpy(copy, buf, *size);
    eddy_free(buf);
    return copy;
}

static eddy_status open_bytes(const uint8_t *p, uint64_t n, gguf_file **f, eddy_error *err) {
    return gguf_open_memory(f, p, n, "test.gguf", err);
}

/* Opens a damaged copy and checks it fails with FORMAT and a message containing want. */
static void expect_format_error(const uint8_t *p, uint64_t n, const char *want, int line) {
    gguf_file *f = NULL;
    eddy_error err;
    eddy_status s = open_bytes(p, n, &f, &err);
    CHECKF(s == EDDY_ERR_FORMAT, "line %d: expected a format error containing \"%s\", got %s", line,
           want, eddy_status_name(s));
    if (s == EDDY_OK) {
        gguf_close(f);
        return;
    }
    CHECK(f == NULL);
    CHECKF(strstr(err.msg, want) != NULL, "line %d: message \"%s\" should contain \"%s\"", line, err.msg,
           want);
    CHECKF(strstr(err.msg, "test.gguf: byte ") == err.msg, "line %d: message \"%s\" should start with the file and byte",
           line, err.msg);
}
#define EXPECT_FORMAT_ERROR(p, n, want) expect_format_error((p), (n), (want), __LINE__)

/* ==== Round trip ==== */

TEST(gguf_reads_every_metadata_type) {
    uint64_t n;
    uint8_t *p = sample_file(3, 32, &n);
    REQUIRE(p != NULL);
    gguf_file *f;
    eddy_error err;
    REQUIRE(open_bytes(p, n, &f, &err) == EDDY_OK);
    CHECK_EQ(f->version, 3);
    CHECK_EQ(f->alignment, 32);
    CHECK_STR(gguf_get_str(f, "general.architecture", "?"), "llama");
    CHECK_STR(gguf_get_str(f, "general.name", "?"), "tiny \"test\"\n");
    CHECK_EQ(gguf_get_int(f, "t.u8", 0), 200);
    CHECK_EQ(gguf_get_int(f, "t.i8", 0), -100);
    CHECK_EQ(gguf_get_int(f, "t.u16", 0), 60000);
    CHECK_EQ(gguf_get_int(f, "t.i16", 0), -30000);
    CHECK_EQ(gguf_get_u32(f, "t.u32", 0), 4000000000u);
    CHECK_EQ(gguf_get_int(f, "t.i32", 0), -2000000000);
    CHECK_EQ(gguf_get_int(f, "t.u64", 7), 7); /* does not fit int64: default */
    CHECK(gguf_get(f, "t.u64")->u == UINT64_MAX);
    CHECK(gguf_get_int(f, "t.i64", 0) == INT64_MIN);
    CHECK_EQ(gguf_get_u32(f, "t.i32", 9), 9); /* negative: default */
    CHECK(gguf_get_float(f, "t.f32", 0) == 0.5);
    CHECK(gguf_get_float(f, "t.f64", 0) == 1e-300);
    CHECK(gguf_get_float(f, "t.u8", 0) == 200.0);
    CHECK(gguf_get_bool(f, "t.bool", false));
    CHECK(gguf_get_bool(f, "missing", true));
    CHECK_STR(gguf_get_str(f, "t.u8", "def"), "def"); /* wrong kind: default */
    CHECK_EQ(gguf_get_int(f, "general.name", -1), -1);

    const gguf_value *a = gguf_get_array(f, "t.arr_i32", GGUF_TYPE_INT32);
    REQUIRE(a != NULL);
    CHECK_EQ(a->arr.n, 5);
    CHECK_EQ(gguf_arr_int(a, 3), -4);
    CHECK(gguf_arr_float(a, 4) == 5.0);
    CHECK(gguf_get_array(f, "t.arr_i32", GGUF_TYPE_STRING) == NULL);
    const gguf_value *fl = gguf_get_array(f, "t.arr_f32", GGUF_TYPE_COUNT);
    REQUIRE(fl != NULL);
    CHECK(gguf_arr_float(fl, 1) == -2.25);
    CHECK(gguf_arr_float(fl, 2) == (double)1e-7f);
    const gguf_value *s = gguf_get_array(f, "t.arr_str", GGUF_TYPE_STRING);
    REQUIRE(s != NULL);
    CHECK_EQ(s->arr.n, 4);
    CHECK(gguf_arr_str(s, 1).len == 0);
    CHECK(gguf_arr_str(s, 2).len == 11 && memcmp(gguf_arr_str(s, 2).ptr, "hello world", 11) == 0);
    CHECK(gguf_arr_str(s, 3).len == 6);
    const gguf_value *e = gguf_get_array(f, "t.empty", GGUF_TYPE_UINT8);
    CHECK(e != NULL && e->arr.n == 0);
    gguf_close(f);
    free(p);
}

TEST(gguf_tensor_directory) {
    for (uint32_t version = 2; version <= 3; version++) {
        uint32_t aligns[] = {32, 4, 64, 4096};
        for (int k = 0; k < 4; k++) {
            uint64_t n;
            uint8_t *p = sample_file(version, aligns[k], &n);
            REQUIRE(p != NULL);
            gguf_file *f;
            eddy_error err;
            if (!CHECKF(open_bytes(p, n, &f, &err) == EDDY_OK, "%s", err.msg)) {
                free(p);
                return;
            }
            CHECK_EQ(f->version, version);
            CHECK_EQ(f->alignment, aligns[k]);
            CHECK_EQ(f->data_offset % aligns[k], 0);
            CHECK_EQ(f->n_tensors, 3);
            int64_t ia = gguf_find_tensor(f, "a.weight"), ib = gguf_find_tensor(f, "b.weight");
            int64_t ic = gguf_find_tensor(f, "c.bias");
            CHECK(ia == 0 && ib == 1 && ic == 2);
            CHECK_EQ(gguf_find_tensor(f, "missing"), -1);
            const gguf_tensor *a = &f->tensors[ia], *b = &f->tensors[ib], *c = &f->tensors[ic];
            CHECK(a->n_dims == 2 && a->ne[0] == 3 && a->ne[1] == 2 && a->ne[2] == 1 && a->ne[3] == 1);
            CHECK(a->type == QTYPE_F32 && a->n_elements == 6 && a->n_bytes == 24);
            float v;
            memcpy(&v, a->data + 5 * 4, 4);
            CHECK(v == 6.0f);
            CHECK(b->n_dims == 3 && b->ne[0] == 32 && b->ne[2] == 2 && b->n_bytes == 68);
            CHECK(b->data[0] == 1 && b->data[67] == (uint8_t)(67 * 13 + 1));
            CHECK(c->type == QTYPE_F16 && c->n_bytes == 10);
            CHECK(b->offset % aligns[k] == 0 && c->offset % aligns[k] == 0);
            gguf_close(f);
            free(p);
        }
    }
}

TEST(gguf_misaligned_tensor_data_is_refused) {
    /* alignment 1 puts the first (F32) tensor at an odd byte of this file */
    uint64_t n;
    uint8_t *p = sample_file(3, 1, &n);
    REQUIRE(p != NULL);
    EXPECT_FORMAT_ERROR(p, n, "is not aligned to the 4 bytes type F32 needs");
    free(p);
}

TEST(gguf_open_file_with_and_without_mmap) {
    uint64_t n;
    uint8_t *p = sample_file(3, 32, &n);
    REQUIRE(p != NULL);
    const char *path = test_tmp_path("sample.gguf");
    REQUIRE(test_write_file(path, p, n));
    for (int no_mmap = 0; no_mmap <= 1; no_mmap++) {
        if (no_mmap) setenv("EDDY_NO_MMAP", "1", 1);
        gguf_file *f;
        eddy_error err;
        eddy_status s = gguf_open(&f, path, &err);
        unsetenv("EDDY_NO_MMAP");
        if (!CHECKF(s == EDDY_OK, "%s", err.msg)) continue;
        CHECK_EQ(f->map.mapped, !no_mmap);
        CHECK_EQ(f->n_tensors, 3);
        CHECK(memcmp(f->bytes, p, n) == 0);
        gguf_close(f);
    }
    gguf_file *f;
    eddy_error err;
    CHECK_EQ(gguf_open(&f, test_tmp_path("nope.gguf"), &err), EDDY_ERR_IO);
    CHECK_CONTAINS(err.msg, "nope.gguf");
    /* an empty file */
    const char *empty = test_tmp_path("empty.gguf");
    REQUIRE(test_write_file(empty, "", 0));
    CHECK_EQ(gguf_open(&f, empty, &err), EDDY_ERR_FORMAT);
    CHECK_CONTAINS(err.msg, "magic truncated");
    free(p);
}

TEST(gguf_header_only_file_without_tensors) {
    gguf_writer *w = gguf_writer_new(3, 32);
    gguf_writer_add_str(w, "general.architecture", "none");
    uint8_t *buf;
    uint64_t n;
    REQUIRE(gguf_writer_finish(w, &buf, &n, NULL) == EDDY_OK);
    gguf_writer_free(w);
    gguf_file *f;
    eddy_error err;
    CHECKF(open_bytes(buf, n, &f, &err) == EDDY_OK, "%s", err.msg);
    if (f) {
        CHECK_EQ(f->n_tensors, 0);
        CHECK_EQ(f->data_offset, n);
        gguf_close(f);
    }
    eddy_free(buf);
}

/* ==== Truncation ==== */

TEST(gguf_truncated_at_every_length_is_refused) {
    uint64_t n;
    uint8_t *p = sample_file(3, 32, &n);
    REQUIRE(p != NULL);
    gguf_file *f;
    eddy_error err;
    REQUIRE(open_bytes(p, n, &f, &err) == EDDY_OK);
    /* the file is valid as soon as the last tensor's data is complete */
    uint64_t needed = 0;
    for (int64_t i = 0; i < f->n_tensors; i++) {
        uint64_t end = f->data_offset + f->tensors[i].offset + f->tensors[i].n_bytes;
        if (end > needed) needed = end;
    }
    gguf_close(f);
    for (uint64_t len = 0; len < n; len++) {
        uint8_t *cut = malloc(len ? len : 1); /* exact size, so ASan sees any over-read */
        memcpy(cut, p, len);
        eddy_status s = open_bytes(cut, len, &f, &err);
        if (len < needed) {
            CHECKF(s == EDDY_ERR_FORMAT, "length %llu: %s", (unsigned long long)len, eddy_status_name(s));
            if (s == EDDY_ERR_FORMAT) CHECKF(strstr(err.msg, "byte ") != NULL, "%s", err.msg);
        } else {
            CHECKF(s == EDDY_OK, "length %llu: %s", (unsigned long long)len, err.msg);
        }
        if (s == EDDY_OK) gguf_close(f);
        free(cut);
    }
    free(p);
}

TEST(gguf_truncation_names_the_structure) {
    uint64_t n;
    uint8_t *p = sample_file(3, 32, &n);
    REQUIRE(p != NULL);
    gguf_file *f;
    REQUIRE(open_bytes(p, n, &f, NULL) == EDDY_OK);
    /* late structures, so the counts alone still fit the truncated length */
    uint64_t kv_last = f->kv[f->n_kv - 1].offset, t0 = f->tensors[0].info_offset;
    uint64_t t1 = f->tensors[1].info_offset;
    int64_t last = f->n_kv - 1;
    uint64_t data = f->data_offset;
    gguf_close(f);
    EXPECT_FORMAT_ERROR(p, 2, "magic truncated");
    EXPECT_FORMAT_ERROR(p, 6, "version truncated");
    EXPECT_FORMAT_ERROR(p, 12, "tensor count truncated");
    EXPECT_FORMAT_ERROR(p, 20, "metadata count truncated");
    EXPECT_FORMAT_ERROR(p, 24, "metadata count"); /* counts cannot fit a 24-byte file */
    char want[64];
    snprintf(want, sizeof want, "metadata key %lld truncated", (long long)last);
    EXPECT_FORMAT_ERROR(p, kv_last + 3, want);
    EXPECT_FORMAT_ERROR(p, kv_last + 10, "runs past the end");
    EXPECT_FORMAT_ERROR(p, t0 + 4, "tensor 0 name truncated");
    EXPECT_FORMAT_ERROR(p, t1 + 8 + 8 + 2, "tensor \"b.weight\" truncated");
    EXPECT_FORMAT_ERROR(p, data, "lies outside");
    free(p);
}

/* ==== Corrupted fields ==== */

static void put_u32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static void put_u64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}

/* Offset of the value type field of metadata key `key` (after its u64 length and bytes). */
static uint64_t kv_type_at(const uint8_t *p, uint64_t n, const char *key) {
    gguf_file *f;
    if (open_bytes(p, n, &f, NULL) != EDDY_OK) return 0;
    int64_t i = gguf_find_key(f, key);
    uint64_t at = i < 0 ? 0 : f->kv[i].offset + 8 + strlen(key);
    gguf_close(f);
    return at;
}

/* Offset of the n_dims field of tensor `name`. */
static uint64_t tensor_at(const uint8_t *p, uint64_t n, const char *name) {
    gguf_file *f;
    if (open_bytes(p, n, &f, NULL) != EDDY_OK) return 0;
    int64_t i = gguf_find_tensor(f, name);
    uint64_t at = i < 0 ? 0 : f->tensors[i].info_offset + 8 + strlen(name);
    gguf_close(f);
    return at;
}

TEST(gguf_corrupted_header_fields) {
    uint64_t n;
    uint8_t *orig = sample_file(3, 32, &n);
    REQUIRE(orig != NULL);
    uint8_t *p = malloc(n);
#define RESET() memcpy(p, orig, n)
    RESET(); p[0] = 'X';
    EXPECT_FORMAT_ERROR(p, n, "not a GGUF file");
    RESET(); put_u32(p + 4, 0x03000000u);
    EXPECT_FORMAT_ERROR(p, n, "big-endian GGUF not supported");
    RESET(); put_u32(p + 4, 1);
    EXPECT_FORMAT_ERROR(p, n, "version 1 is not supported");
    RESET(); put_u32(p + 4, 4);
    EXPECT_FORMAT_ERROR(p, n, "unsupported GGUF version 4");
    RESET(); put_u64(p + 8, UINT64_MAX);
    EXPECT_FORMAT_ERROR(p, n, "tensor count");
    RESET(); put_u64(p + 8, 1ull << 40);
    EXPECT_FORMAT_ERROR(p, n, "tensor count");
    RESET(); put_u64(p + 16, 1ull << 62);
    EXPECT_FORMAT_ERROR(p, n, "metadata count");
    /* one tensor more than there are: the fourth info is read from the data */
    RESET(); put_u64(p + 8, 4);
    gguf_file *f;
    eddy_error err;
    CHECK(open_bytes(p, n, &f, &err) != EDDY_OK);
    free(p);
    free(orig);
#undef RESET
}

TEST(gguf_corrupted_metadata_fields) {
    uint64_t n;
    uint8_t *orig = sample_file(3, 32, &n);
    REQUIRE(orig != NULL);
    uint8_t *p = malloc(n);
#define RESET() memcpy(p, orig, n)
    uint64_t first_key = 24;
    RESET(); put_u64(p + first_key, UINT64_MAX);
    EXPECT_FORMAT_ERROR(p, n, "runs past the end");
    RESET(); put_u64(p + first_key, 0);
    EXPECT_FORMAT_ERROR(p, n, "metadata key 0 is empty");
    RESET(); p[first_key + 8 + 3] = 0;
    EXPECT_FORMAT_ERROR(p, n, "NUL byte");
    RESET(); memcpy(p + kv_type_at(orig, n, "t.i8") - 2, "u8", 2); /* "t.i8" becomes "t.u8" */
    EXPECT_FORMAT_ERROR(p, n, "duplicate metadata key \"t.u8\"");
    RESET(); put_u32(p + kv_type_at(orig, n, "t.u32"), 13);
    EXPECT_FORMAT_ERROR(p, n, "metadata \"t.u32\": unknown value type 13");
    RESET(); p[kv_type_at(orig, n, "t.bool") + 4] = 2;
    EXPECT_FORMAT_ERROR(p, n, "bool has value 2");
    uint64_t arr = kv_type_at(orig, n, "t.arr_i32");
    RESET(); put_u32(p + arr + 4, 99);
    EXPECT_FORMAT_ERROR(p, n, "unknown array element type 99");
    RESET(); put_u64(p + arr + 8, 1ull << 61);
    EXPECT_FORMAT_ERROR(p, n, "array count");
    uint64_t sarr = kv_type_at(orig, n, "t.arr_str");
    RESET(); put_u64(p + sarr + 12 + 8 + 1, 1ull << 50); /* second string's length */
    EXPECT_FORMAT_ERROR(p, n, "runs past the end");
    /* alignment: zero, not a power of two, signed type */
    gguf_writer *w = gguf_writer_new(3, 32);
    gguf_writer_add_uint(w, "general.alignment", GGUF_TYPE_UINT32, 48);
    uint8_t *buf;
    uint64_t bn;
    REQUIRE(gguf_writer_finish(w, &buf, &bn, NULL) == EDDY_OK);
    gguf_writer_free(w);
    EXPECT_FORMAT_ERROR(buf, bn, "general.alignment is 48");
    put_u32(buf + bn - 4, 0);
    EXPECT_FORMAT_ERROR(buf, bn, "general.alignment is 0");
    put_u32(buf + bn - 8, GGUF_TYPE_INT32);
    EXPECT_FORMAT_ERROR(buf, bn, "general.alignment has type i32");
    eddy_free(buf);
    free(p);
    free(orig);
#undef RESET
}

TEST(gguf_corrupted_tensor_fields) {
    uint64_t n;
    uint8_t *orig = sample_file(3, 32, &n);
    REQUIRE(orig != NULL);
    uint8_t *p = malloc(n);
#define RESET() memcpy(p, orig, n)
    uint64_t a = tensor_at(orig, n, "a.weight"); /* n_dims=2, ne 3 2, type, offset */
    uint64_t b = tensor_at(orig, n, "b.weight"); /* n_dims=3, ne 32 1 2, type, offset */
    REQUIRE(a != 0 && b != 0);
    RESET(); put_u32(p + a, 0);
    EXPECT_FORMAT_ERROR(p, n, "dimension count 0");
    RESET(); put_u32(p + a, 5);
    EXPECT_FORMAT_ERROR(p, n, "dimension count 5");
    RESET(); put_u64(p + a + 4 + 8, 0);
    EXPECT_FORMAT_ERROR(p, n, "dimension 1 is 0");
    RESET(); put_u64(p + a + 4, 1ull << 63);
    EXPECT_FORMAT_ERROR(p, n, "dimension 0 is");
    RESET(); put_u64(p + a + 4, 1ull << 40); put_u64(p + a + 12, 1ull << 40);
    EXPECT_FORMAT_ERROR(p, n, "element count overflows");
    RESET(); put_u64(p + a + 4 + 8, 1ull << 61); /* 3 * 2^61 floats fit int64, their bytes don't */
    EXPECT_FORMAT_ERROR(p, n, "byte size overflows");
    RESET(); put_u32(p + a + 4 + 16, 4); /* removed type id */
    EXPECT_FORMAT_ERROR(p, n, "unknown tensor type 4");
    RESET(); put_u32(p + a + 4 + 16, 1000);
    EXPECT_FORMAT_ERROR(p, n, "unknown tensor type 1000");
    RESET(); put_u32(p + a + 4 + 16, QTYPE_Q4_K); /* row of 3 is not a multiple of 256 */
    EXPECT_FORMAT_ERROR(p, n, "not a multiple of the Q4_K block size 256");
    RESET(); put_u64(p + b + 4 + 24 + 4, 8);
    EXPECT_FORMAT_ERROR(p, n, "is not a multiple of the alignment 32");
    RESET(); put_u64(p + b + 4 + 24 + 4, 1ull << 40);
    EXPECT_FORMAT_ERROR(p, n, "lies outside");
    RESET(); put_u64(p + b + 4 + 24 + 4, UINT64_MAX - 31);
    EXPECT_FORMAT_ERROR(p, n, "lies outside");
    RESET(); memcpy(p + b - 8, "a", 1); /* "b.weight" becomes "a.weight" */
    EXPECT_FORMAT_ERROR(p, n, "duplicate tensor name \"a.weight\"");
    free(p);
    free(orig);
#undef RESET
}

TEST(gguf_nested_arrays) {
    /* hand-built: one key holding arr[arr[i32]] = [[1,2],[3]] */
    uint8_t buf[256];
    size_t n = 0;
    memcpy(buf, "GGUF", 4), n = 4;
    put_u32(buf + n, 3), n += 4;
    put_u64(buf + n, 0), n += 8;
    put_u64(buf + n, 1), n += 8;
    put_u64(buf + n, 3), n += 8;
    memcpy(buf + n, "k.n", 3), n += 3;
    put_u32(buf + n, GGUF_TYPE_ARRAY), n += 4;
    put_u32(buf + n, GGUF_TYPE_ARRAY), n += 4;
    put_u64(buf + n, 2), n += 8;
    put_u32(buf + n, GGUF_TYPE_INT32), n += 4;
    put_u64(buf + n, 2), n += 8;
    put_u32(buf + n, 1), n += 4;
    put_u32(buf + n, 2), n += 4;
    put_u32(buf + n, GGUF_TYPE_INT32), n += 4;
    put_u64(buf + n, 1), n += 8;
    put_u32(buf + n, 3), n += 4;
    gguf_file *f;
    eddy_error err;
    REQUIRE(open_bytes(buf, n, &f, &err) == EDDY_OK);
    const gguf_value *v = gguf_get_array(f, "k.n", GGUF_TYPE_ARRAY);
    REQUIRE(v != NULL && v->arr.n == 2);
    CHECK_EQ(v->arr.elems[0].arr.n, 2);
    CHECK_EQ(gguf_arr_int(&v->arr.elems[0], 1), 2);
    CHECK_EQ(gguf_arr_int(&v->arr.elems[1], 0), 3);
    gguf_close(f);

    /* nested deeper than the limit: arrays of one array each, all the way down */
    uint8_t deep[1024];
    size_t m = 0;
    memcpy(deep, buf, 24 + 8 + 3), m = 24 + 8 + 3;
    put_u32(deep + m, GGUF_TYPE_ARRAY), m += 4;
    for (int d = 0; d < 20; d++) {
        put_u32(deep + m, GGUF_TYPE_ARRAY), m += 4;
        put_u64(deep + m, 1), m += 8;
    }
    memset(deep + m, 0, 64), m += 64;
    EXPECT_FORMAT_ERROR(deep, m, "nested more than");
}

/* gguf_writer_add_value copies every value of a file as it was read: every scalar
 * type, strings with any bytes, string arrays and nested arrays (sample.gguf has them
 * all); the copy reads back to the same text, key by key. */
TEST(gguf_writer_copies_values) {
    gguf_file *f, *g;
    REQUIRE(gguf_open(&f, test_data_path("gguf/sample.gguf"), NULL) == EDDY_OK);
    gguf_writer *w = gguf_writer_new(3, 32);
    for (int64_t i = 0; i < f->n_kv; i++) gguf_writer_add_value(w, f->kv[i].key, &f->kv[i].val);
    uint8_t *bytes;
    uint64_t size;
    REQUIRE(gguf_writer_finish(w, &bytes, &size, NULL) == EDDY_OK);
    gguf_writer_free(w);
    eddy_error err;
    REQUIRE(gguf_open_memory(&g, bytes, size, "copy", &err) == EDDY_OK);
    REQUIRE_EQ(g->n_kv, f->n_kv);
    for (int64_t i = 0; i < f->n_kv; i++) {
        char a[2048], b[2048];
        eddy_gguf_kv_format(f, i, a, sizeof a, 1000);
        eddy_gguf_kv_format(g, i, b, sizeof b, 1000);
        CHECK_STR(g->kv[i].key, f->kv[i].key);
        CHECK_EQ(g->kv[i].val.type, f->kv[i].val.type);
        CHECKF(!strcmp(a, b), "%s: %s became %s", f->kv[i].key, a, b);
    }
    gguf_close(g);
    eddy_free(bytes);
    gguf_close(f);
}

/* ==== Out of memory and random damage ==== */

TEST(gguf_out_of_memory_at_every_allocation) {
    uint64_t n;
    uint8_t *p = sample_file(3, 32, &n);
    REQUIRE(p != NULL);
    int64_t live0 = alloc_live_count();
    bool succeeded = false;
    for (int k = 0; k < 200 && !succeeded; k++) {
        alloc_fail_after(k);
        gguf_file *f = NULL;
        eddy_error err;
        eddy_status s = open_bytes(p, n, &f, &err);
        alloc_fail_after(-1);
        if (s == EDDY_OK) {
            succeeded = true;
            gguf_close(f);
        } else {
            CHECKF(s == EDDY_ERR_NOMEM, "allocation %d: %s", k, err.msg);
            CHECK(f == NULL);
        }
        CHECKF(alloc_live_count() == live0, "allocation %d leaked %lld blocks", k,
               (long long)(alloc_live_count() - live0));
    }
    CHECK(succeeded);
    free(p);
}

TEST(gguf_random_byte_damage_never_crashes) {
    uint64_t n;
    uint8_t *orig = sample_file(3, 32, &n);
    REQUIRE(orig != NULL);
    test_rng rng = test_rng_new();
    int64_t live0 = alloc_live_count();
    int opened = 0;
    for (int iter = 0; iter < 3000; iter++) {
        uint8_t *p = malloc(n);
        memcpy(p, orig, n);
        int flips = 1 + (int)test_rng_below(&rng, 4);
        for (int k = 0; k < flips; k++) {
            /* damage mostly the header, where the structure is */
            uint64_t at = test_rng_below(&rng, (uint32_t)(n < 600 ? n : 600));
            p[at] = (uint8_t)test_rng_u64(&rng);
        }
        uint64_t len = test_rng_below(&rng, 8) == 0 ? test_rng_below(&rng, (uint32_t)n) : n;
        gguf_file *f;
        eddy_error err;
        eddy_status s = open_bytes(p, len, &f, &err);
        if (s == EDDY_OK) {
            opened++;
            /* whatever opened must be self-consistent */
            for (int64_t i = 0; i < f->n_tensors; i++) {
                const gguf_tensor *t = &f->tensors[i];
                CHECK(t->data >= p + f->data_offset && t->data + t->n_bytes <= p + len);
            }
            gguf_close(f);
        } else {
            CHECK(s == EDDY_ERR_FORMAT);
            CHECK(strchr(err.msg, '\n') == NULL);
        }
        free(p);
    }
    CHECK_EQ(alloc_live_count(), live0);
    CHECK(opened > 0); /* some flips land in values and leave the file valid */
    free(orig);
}
