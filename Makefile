# pk — one build command: `make` (library, the pk tool, tests); `make test` runs the tests.
# Variants: `make SAN=address` (ASan+UBSan), `make SAN=thread` (TSan), each into its own build dir.
CC      ?= cc
SAN     ?=
BUILD   ?= build$(if $(SAN),-$(SAN))
CFLAGS  ?= -O2 -g
WARN    := -std=c11 -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wvla
CPPFLAGS := -D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE -Iinclude -Isrc -I/usr/include/cjson
LDLIBS  := -lcjson -lpcre2-8 -lpthread -lm -ldl
ifeq ($(SAN),address)
  CFLAGS += -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
  LDFLAGS += -fsanitize=address,undefined
endif
ifeq ($(SAN),thread)
  CFLAGS += -fsanitize=thread
  LDFLAGS += -fsanitize=thread
endif

LIB_SRCS  := $(sort $(wildcard src/*.c src/*/*.c src/*/*/*.c))
LIB_OBJS  := $(LIB_SRCS:%.c=$(BUILD)/%.o)
# The CUDA backend's device headers, embedded into libpk as strings: kernel.cu is written beside
# them, so generated code is self-contained and the kernel cache key covers them.
CUDA_EMBED := include/pk.h src/pk_abi.h src/common/bf16.h src/kernels/cpu/cpu_kernels.h src/runtime/decode_step.h \
              src/kernels/attention_decode_layout.h src/kernels/stage_layout.h \
              src/runtime/cuda/gen_api.h $(sort $(wildcard src/kernels/cuda/*.cuh src/runtime/cuda/device/*.cuh))
LIB_OBJS  += $(BUILD)/gen/cuda_embedded.o
TOOL_SRCS := $(sort $(wildcard tools/*.c))
TEST_SRCS := $(sort $(wildcard tests/test_*.c))
TESTS     := $(TEST_SRCS:tests/%.c=$(BUILD)/tests/%)
DEPS      := $(LIB_OBJS:.o=.d) $(TOOL_SRCS:%.c=$(BUILD)/%.d)

# tests/gpu/test_cuda_e2e runs on a GPU machine only (scripts/gpu_check.sh); built here so that
# every build compiles it.
GPU_TESTS := $(BUILD)/tests/gpu/test_cuda_e2e

all: $(BUILD)/pk $(TESTS) $(GPU_TESTS)

# The archive is rebuilt from scratch (`ar rcs` never drops a member), and whenever the list of
# objects changes: a deleted source file must not leave its object behind in libpk.a.
$(BUILD)/libpk.objs: FORCE
	@mkdir -p $(@D)
	@echo '$(LIB_OBJS)' | cmp -s - $@ || echo '$(LIB_OBJS)' > $@

$(BUILD)/libpk.a: $(LIB_OBJS) $(BUILD)/libpk.objs
	@mkdir -p $(@D)
	rm -f $@
	$(AR) rcs $@ $(LIB_OBJS)

$(BUILD)/%.o: %.c
	@mkdir -p $(@D)
	$(CC) $(WARN) $(CPPFLAGS) $(CFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/gen/cuda_embedded.c: $(CUDA_EMBED) scripts/embed_files.sh
	@mkdir -p $(@D)
	sh scripts/embed_files.sh $(CUDA_EMBED) > $@.tmp && mv $@.tmp $@

$(BUILD)/gen/cuda_embedded.o: $(BUILD)/gen/cuda_embedded.c
	$(CC) $(WARN) $(CPPFLAGS) $(CFLAGS) -c $< -o $@

$(BUILD)/pk: $(TOOL_SRCS:%.c=$(BUILD)/%.o) $(BUILD)/libpk.a
	$(CC) $(LDFLAGS) $^ $(LDLIBS) -o $@

$(BUILD)/tests/%: tests/%.c $(BUILD)/libpk.a tests/check.h tests/e2e_model.h tests/e2e_table.h
	@mkdir -p $(@D)
	$(CC) $(WARN) $(CPPFLAGS) $(CFLAGS) $(LDFLAGS) $< $(BUILD)/libpk.a $(LDLIBS) -o $@

test: all
	@BUILD=$(BUILD) bash tests/run.sh

check:
	@bash tests/check_all.sh

clean:
	rm -rf build build-address build-thread

.PHONY: all test check clean FORCE
FORCE:
-include $(DEPS)
