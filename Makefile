# eddy — build, test, demo.
#
#   make            build/eddy, build/libeddy.a, build/libeddy.so
#   make test       every test: unit tests, the same under ASan+UBSan, fuzz smoke, CLI and
#                   library tests
#   make install    PREFIX=/usr/local (default) [DESTDIR=staging dir]: binary, libraries,
#                   header, pkg-config file
#   make demo       build and run eddy on a model it fetches by itself
#   make fuzz       run the GGUF fuzzer (FUZZ_SECONDS=600 by default)
#
# Variables: CC (default cc), OPT (default -O2 -g), WERROR=1 makes warnings errors
# (make test sets it). Sources are found under src/; a file named *_avx2.c,
# *_avx512.c, *_amx.c or *_neon.c is compiled with that ISA's flags and only for its
# architecture; the code calls it only when the CPU has the feature.

CC      ?= cc
OPT     ?= -O2 -g
# CUDA=1 adds the GPU backend (src/cuda, needs nvcc and the CUDA toolkit) and builds in
# build/cuda unless BUILD says otherwise; without it, asking for the GPU is a clear error.
# CUDA_EMU=1 compiles the same backend with the host C++ compiler and runs its kernels on
# the CPU (src/cuda/ck_emu.h), in build/cuda-emu: how the tests run it without a GPU.
CUDA    ?= 0
CUDA_EMU ?= 0
ifeq ($(CUDA),1)
BUILD   ?= build/cuda
endif
ifeq ($(CUDA_EMU),1)
BUILD   ?= build/cuda-emu
endif
BUILD   ?= build
WERROR  ?= 0

ARCH := $(shell $(CC) -dumpmachine 2>/dev/null | cut -d- -f1)

WARN    := -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Wvla
ifeq ($(WERROR),1)
WARN    += -Werror
endif
# Everything is compiled with hidden visibility: include/eddy.h switches it back to default
# around its declarations, so libeddy.so exports the public eddy_* API and nothing else
# (an internal name such as bind or matmul must never meet a program's or libc's).
CFLAGS_ALL := -std=c11 $(WARN) $(OPT) -fPIC -fvisibility=hidden -pthread $(CFLAGS)
# The library and its tests see the internal headers; the CLI gets only the public one
# (its rule below overrides this), which keeps it a plain user of libeddy.
INCLUDES   := -Iinclude -Isrc
LDLIBS_ALL := -lm -lpthread $(LDLIBS)

FLAGS_AVX2   := -mavx2 -mfma -mf16c
FLAGS_AVX512 := -mavx2 -mfma -mf16c -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512vnni
FLAGS_AMX    := $(FLAGS_AVX512) -mavx512bf16 -mamx-tile -mamx-bf16
FLAGS_NEON   := -march=armv8.2-a+dotprod+fp16

ALL_SRCS := $(shell find src -name '*.c' | sort)
ifeq ($(ARCH),x86_64)
LIB_SRCS := $(filter-out %_neon.c,$(ALL_SRCS))
else ifeq ($(ARCH),aarch64)
LIB_SRCS := $(filter-out %_avx2.c %_avx512.c %_amx.c,$(ALL_SRCS))
else
LIB_SRCS := $(filter-out %_avx2.c %_avx512.c %_amx.c %_neon.c,$(ALL_SRCS))
endif
# ==== CUDA ====
NVCC       ?= nvcc
CUDA_HOME  ?= $(patsubst %/bin/,%,$(dir $(shell command -v $(NVCC) 2>/dev/null)))
# machine code for Ampere (sm_80) and Hopper (sm_90), PTX for later GPUs
CUDA_ARCHS ?= -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90 \
              -gencode arch=compute_90,code=compute_90
ifeq ($(CUDA),1)
LIB_SRCS   := $(filter-out src/cuda/cuda_off.c,$(LIB_SRCS))
CU_SRCS    := $(sort $(wildcard src/cuda/*.cu))
CFLAGS_ALL += -isystem $(CUDA_HOME)/include
LDLIBS_ALL += -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lcublas -lcudart -lstdc++
else ifeq ($(CUDA_EMU),1)
LIB_SRCS   := $(filter-out src/cuda/cuda_off.c,$(LIB_SRCS))
CU_SRCS    := $(sort $(wildcard src/cuda/*.cu)) tests/cuda/emu_runtime.cpp
CFLAGS_ALL += -isystem $(CUDA_HOME)/include
LDLIBS_ALL += -lubsan -lstdc++
else
LIB_SRCS   := $(filter-out $(filter-out src/cuda/cuda_off.c,$(wildcard src/cuda/*.c)),$(LIB_SRCS))
CU_SRCS    :=
endif
NVCC_FLAGS := -std=c++17 -O2 $(CUDA_ARCHS) -Xcompiler -fPIC,-fvisibility=hidden -Werror all-warnings
CXX        ?= g++
# The emulator stops at a load or store of a type from an address not aligned to it (a
# float4 from one not a multiple of 16), which faults on a GPU and passes on x86.
EMU_FLAGS  := -std=c++17 -O2 -g -fPIC -fvisibility=hidden -ffp-contract=off -fno-strict-aliasing -DEDDY_CUDA_EMU \
              -isystem $(CUDA_HOME)/include -Wall -Wno-unused-variable -Wno-unused-function -Wno-unknown-pragmas \
              -fsanitize=alignment -fno-sanitize-recover=alignment

CLI_SRCS  := $(sort $(wildcard cli/*.c))
# `eddy serve` (cli/serve_*.c) links libmicrohttpd and jansson (Debian: libmicrohttpd-dev,
# libjansson-dev); libeddy itself needs neither. SERVER=0 builds eddy without it: the
# aarch64 cross build does, as the arm64 builds of those libraries are not installed there
# (its unit tests are what runs under qemu).
SERVER    ?= 1
ifeq ($(SERVER),1)
CLI_LIBS  := -lmicrohttpd -ljansson
else
CLI_SRCS  := $(filter-out cli/serve_%.c,$(CLI_SRCS))
CLI_DEFS  := -DEDDY_NO_SERVER
endif
TEST_SRCS := $(sort $(wildcard tests/*.c))
FUZZ_SRCS := $(sort $(wildcard tests/fuzz/*.c))

isa_flags = $(if $(filter %_avx2.c,$1),$(FLAGS_AVX2),$(if $(filter %_avx512.c,$1),$(FLAGS_AVX512),$(if $(filter %_amx.c,$1),$(FLAGS_AMX),$(if $(filter %_neon.c,$1),$(FLAGS_NEON)))))

# The library's version is the header's EDDY_VERSION_STRING; SOMAJOR is the ABI's: a
# program linked with -leddy records libeddy.so.$(SOMAJOR) (the SONAME) and keeps
# running against any later libeddy.so.$(SOMAJOR).*. Raise it when the ABI breaks.
VERSION := $(shell sed -n 's/^\#define EDDY_VERSION_STRING "\(.*\)"/\1/p' include/eddy.h)
SOMAJOR := 0

# objcopy for the target's objects (cross-aarch64 passes the cross one)
OBJCOPY ?= objcopy

# ==== Release build ====

OBJ      := $(BUILD)/obj
LIB_OBJS := $(LIB_SRCS:%.c=$(OBJ)/%.o) $(patsubst %.cpp,$(OBJ)/%.o,$(CU_SRCS:%.cu=$(OBJ)/%.o))
CLI_OBJS := $(CLI_SRCS:%.c=$(OBJ)/%.o)
TEST_OBJS := $(TEST_SRCS:%.c=$(OBJ)/%.o)

.PHONY: all lib test unit-tests demo fuzz clean deps asan-tests fuzz-build cross-aarch64 install cuda-tests cuda-build
all: $(BUILD)/eddy $(BUILD)/libeddy.a $(BUILD)/libeddy.so

lib: $(BUILD)/libeddy.a $(BUILD)/libeddy.so

$(CLI_OBJS): INCLUDES := -Iinclude $(CLI_DEFS)

$(OBJ)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) $(INCLUDES) $(call isa_flags,$<) -MMD -MP -c $< -o $@

ifeq ($(CUDA_EMU),1)
$(OBJ)/%.o: %.cu
	@mkdir -p $(dir $@)
	$(CXX) -x c++ $(EMU_FLAGS) -Iinclude -Isrc -MMD -MP -c $< -o $@
$(OBJ)/%.o: %.cpp
	@mkdir -p $(dir $@)
	$(CXX) $(EMU_FLAGS) -Iinclude -Isrc -MMD -MP -c $< -o $@
else
$(OBJ)/%.o: %.cu
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCC_FLAGS) -Iinclude -Isrc -MMD -MP -c $< -o $@
endif

# The CUDA kernel and model tests (tests/cuda/): built by `make CUDA=1 cuda-tests`, run
# on a machine with an NVIDIA GPU (scripts/device_check.sh).
CUDA_TEST_SRCS := $(sort $(wildcard tests/cuda/*.c))
CUDA_TEST_OBJS := $(CUDA_TEST_SRCS:%.c=$(OBJ)/%.o) $(OBJ)/tests/test_main.o $(OBJ)/tests/test_seq.o
$(CUDA_TEST_OBJS): INCLUDES += -Itests -isystem $(CUDA_HOME)/include
$(BUILD)/eddy-cuda-tests: $(CUDA_TEST_OBJS) $(OBJ)/libeddy-internal.a
	$(CC) -pthread $(LDFLAGS) -o $@ $(filter %.o,$^) $(OBJ)/libeddy-internal.a $(LDLIBS_ALL)

# Each decode kernel's time at the device check model's shapes (tests/cuda/bench/)
$(OBJ)/tests/cuda/bench/bench_kernels.o: INCLUDES += -isystem $(CUDA_HOME)/include
$(BUILD)/eddy-cuda-bench: $(OBJ)/tests/cuda/bench/bench_kernels.o $(OBJ)/libeddy-internal.a
	$(CC) -pthread $(LDFLAGS) -o $@ $(filter %.o,$^) $(OBJ)/libeddy-internal.a $(LDLIBS_ALL)

cuda-tests: $(BUILD)/eddy-cuda-tests $(BUILD)/eddy-cuda-bench

# `make test` compiles the CUDA backend whenever nvcc is there, and runs its tests on the
# CPU emulator (build/cuda-emu; scripts/run-tests.sh runs them).
cuda-build:
	@if command -v $(NVCC) >/dev/null 2>&1; then \
		$(MAKE) --no-print-directory CUDA=1 WERROR=1 BUILD=$(BUILD)/cuda all cuda-tests && \
		$(MAKE) --no-print-directory CUDA_EMU=1 WERROR=1 BUILD=$(BUILD)/cuda-emu all cuda-tests; \
	else echo "nvcc not found: the CUDA backend is not compiled"; fi

# libeddy.a holds one object: all library objects linked together (-r), then every
# hidden symbol made local. Hidden visibility alone does not protect a static link: the
# linker still resolves a program's bind() to a hidden global bind. A local symbol
# cannot be reached from outside its object, so a program linking libeddy.a sees only
# eddy_*.
$(OBJ)/libeddy.o: $(LIB_OBJS)
	$(CC) -r -nostdlib -o $@.tmp $^
	$(OBJCOPY) --localize-hidden $@.tmp $@
	@rm -f $@.tmp

$(BUILD)/libeddy.a: $(OBJ)/libeddy.o
	@rm -f $@
	ar rcs $@ $^

# The tests call internal functions; they link this archive of the plain objects.
$(OBJ)/libeddy-internal.a: $(LIB_OBJS)
	@rm -f $@
	ar rcs $@ $^

# libeddy.so.VERSION is the file, libeddy.so.SOMAJOR (the SONAME, what the dynamic
# loader looks for) and libeddy.so (what -leddy finds when linking) link to it.
$(BUILD)/libeddy.so.$(VERSION): $(LIB_OBJS)
	$(CC) -shared -pthread -Wl,-soname,libeddy.so.$(SOMAJOR) $(LDFLAGS) -o $@ $^ $(LDLIBS_ALL)

$(BUILD)/libeddy.so.$(SOMAJOR): $(BUILD)/libeddy.so.$(VERSION)
	ln -sf $(notdir $<) $@

$(BUILD)/libeddy.so: $(BUILD)/libeddy.so.$(SOMAJOR)
	ln -sf $(notdir $<) $@

# The CLI links the public archive, as any program would.
$(BUILD)/eddy: $(CLI_OBJS) $(BUILD)/libeddy.a
	$(CC) -pthread $(LDFLAGS) -o $@ $(CLI_OBJS) $(BUILD)/libeddy.a $(CLI_LIBS) $(LDLIBS_ALL)

$(BUILD)/eddy-tests: $(TEST_OBJS) $(OBJ)/libeddy-internal.a
	$(CC) -pthread $(LDFLAGS) -o $@ $(TEST_OBJS) $(OBJ)/libeddy-internal.a $(LDLIBS_ALL)

# ==== Install ====

# `make install PREFIX=/usr DESTDIR=/tmp/pkg`: files go to DESTDIR/PREFIX/..., and the
# paths written into eddy.pc are PREFIX's (DESTDIR is only a staging root).
PREFIX     ?= /usr/local
BINDIR     ?= $(PREFIX)/bin
LIBDIR     ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include
PCDIR      ?= $(LIBDIR)/pkgconfig

install: all
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(LIBDIR) $(DESTDIR)$(INCLUDEDIR) $(DESTDIR)$(PCDIR)
	install -m 755 $(BUILD)/eddy $(DESTDIR)$(BINDIR)/eddy
	install -m 644 include/eddy.h $(DESTDIR)$(INCLUDEDIR)/eddy.h
	install -m 644 $(BUILD)/libeddy.a $(DESTDIR)$(LIBDIR)/libeddy.a
	install -m 755 $(BUILD)/libeddy.so.$(VERSION) $(DESTDIR)$(LIBDIR)/libeddy.so.$(VERSION)
	ln -sf libeddy.so.$(VERSION) $(DESTDIR)$(LIBDIR)/libeddy.so.$(SOMAJOR)
	ln -sf libeddy.so.$(SOMAJOR) $(DESTDIR)$(LIBDIR)/libeddy.so
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@LIBDIR@|$(LIBDIR)|' -e 's|@INCLUDEDIR@|$(INCLUDEDIR)|' \
	  -e 's|@VERSION@|$(VERSION)|' eddy.pc.in >$(DESTDIR)$(PCDIR)/eddy.pc

# ==== aarch64 cross build (NEON code paths), run under qemu-user by make test ====

CROSS_CC ?= aarch64-linux-gnu-gcc
CROSS_OBJCOPY ?= $(CROSS_CC:%gcc=%objcopy)
cross-aarch64:
	@$(MAKE) --no-print-directory CC=$(CROSS_CC) OBJCOPY=$(CROSS_OBJCOPY) BUILD=$(BUILD)/aarch64 LDFLAGS=-static SERVER=0 \
	  $(BUILD)/aarch64/eddy $(BUILD)/aarch64/eddy-tests

# ==== Sanitizer build (ASan + UBSan): same sources, own object tree ====

SAN_CC    ?= $(shell command -v clang >/dev/null 2>&1 && echo clang || echo $(CC))
SAN       := $(BUILD)/asan
SAN_FLAGS := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
SAN_CFLAGS := -std=c11 $(WARN) -O1 -g $(SAN_FLAGS) -pthread -DEDDY_SANITIZE=1 $(CFLAGS)
SAN_LIB_OBJS  := $(LIB_SRCS:%.c=$(SAN)/%.o)
SAN_TEST_OBJS := $(TEST_SRCS:%.c=$(SAN)/%.o)
SAN_CLI_OBJS  := $(CLI_SRCS:%.c=$(SAN)/%.o)

$(SAN_CLI_OBJS): INCLUDES := -Iinclude $(CLI_DEFS)

$(SAN)/%.o: %.c
	@mkdir -p $(dir $@)
	$(SAN_CC) $(SAN_CFLAGS) $(INCLUDES) $(call isa_flags,$<) -MMD -MP -c $< -o $@

$(SAN)/eddy-tests: $(SAN_TEST_OBJS) $(SAN_LIB_OBJS)
	$(SAN_CC) $(SAN_FLAGS) -pthread -o $@ $^ $(LDLIBS_ALL)

# The sanitizer eddy links the library's objects as one object in which every name but the
# public eddy_* is local, as the release eddy links libeddy.a. The sanitizer runtime makes the
# executable export its symbols, and an internal name would otherwise stand in for the C
# library's in the shared libraries the CLI links (libmicrohttpd's bind() calling eddy's).
$(SAN)/libeddy-public.o: $(SAN_LIB_OBJS)
	$(SAN_CC) -r -nostdlib -o $@.tmp $^
	$(OBJCOPY) --wildcard --keep-global-symbol='eddy_*' $@.tmp $@
	@rm -f $@.tmp

$(SAN)/eddy: $(SAN_CLI_OBJS) $(SAN)/libeddy-public.o
	$(SAN_CC) $(SAN_FLAGS) -pthread -o $@ $^ $(CLI_LIBS) $(LDLIBS_ALL)

# ==== Fuzzers (clang libFuzzer) ====

FUZZ      := $(BUILD)/fuzz
FUZZ_CC   ?= clang
FUZZ_FLAGS := -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all -g -O1
FUZZ_CFLAGS := -std=c11 $(WARN) -pthread -Iinclude -Isrc -DEDDY_SANITIZE=1 $(CFLAGS)
FUZZ_LIB_OBJS := $(LIB_SRCS:%.c=$(FUZZ)/%.o)
FUZZ_BINS := $(FUZZ_SRCS:tests/fuzz/%.c=$(FUZZ)/%)
FUZZ_SECONDS ?= 600

$(FUZZ)/%.o: %.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link,address,undefined -g -O1 $(call isa_flags,$<) -MMD -MP -c $< -o $@

$(FUZZ)/%: tests/fuzz/%.c $(FUZZ_LIB_OBJS)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) $(FUZZ_FLAGS) -o $@ $< $(FUZZ_LIB_OBJS) $(LDLIBS_ALL)

# keep the fuzz objects (make would delete them as intermediates of the pattern rule)
.SECONDARY: $(FUZZ_LIB_OBJS)

fuzz-build: $(FUZZ_BINS)

# `make fuzz FUZZ_SECONDS=N`: each fuzzer runs N seconds on its corpus
# (tests/fuzz/corpus/<name>, seeds under tests/data/fuzz-seeds/<name>).
fuzz: deps fuzz-build
	@for f in $(FUZZ_BINS); do n=$$(basename $$f); \
	  mkdir -p $(BUILD)/fuzz-corpus/$$n; \
	  echo "fuzzing $$n for $(FUZZ_SECONDS)s"; \
	  $$f -max_total_time=$(FUZZ_SECONDS) -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
	    $(BUILD)/fuzz-corpus/$$n tests/data/fuzz-seeds/$$n || exit 1; done

# ==== Entry points ====

deps:
	@scripts/ensure-deps.sh test

unit-tests: $(BUILD)/eddy-tests

asan-tests: $(SAN)/eddy-tests $(SAN)/eddy

test: deps
	@$(MAKE) --no-print-directory WERROR=1 all $(BUILD)/eddy-tests asan-tests fuzz-build
	@$(MAKE) --no-print-directory WERROR=1 cross-aarch64
	@$(MAKE) --no-print-directory cuda-build
	@scripts/run-tests.sh $(BUILD)

demo:
	@scripts/ensure-deps.sh demo
	@$(MAKE) --no-print-directory all
	@scripts/demo.sh $(BUILD)

clean:
	rm -rf $(BUILD)

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
