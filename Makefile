# SPDX-License-Identifier: Apache-2.0
# pk — one build command: `make` (library, the pk tool, tests); `make test` runs the tests.
# Variants: `make SAN=address` (ASan+UBSan), `make SAN=thread` (TSan), each into its own build dir.
# `make deps` / `make deps-test` install the build / test dependencies (Debian, as root or through
# sudo); `make install PREFIX=... [DESTDIR=...]` installs pk, libpk.so / libpk.a, pk.h and pk.pc.
CC      ?= cc
SAN     ?=
BUILD   ?= build$(if $(SAN),-$(SAN))
CFLAGS  ?= -O2 -g
WARN    := -std=c11 -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wvla
CPPFLAGS := -D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE -Iinclude -Isrc -I/usr/include/cjson
LDLIBS  := -lcjson -lpcre2-8 -lpthread -lm -ldl
PREFIX  ?= /usr/local
BINDIR  ?= $(PREFIX)/bin
LIBDIR  ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include
PKGCONFIGDIR ?= $(LIBDIR)/pkgconfig
# The library's version is pk.h's PK_VERSION_STRING; the soname carries its major number.
VERSION := $(shell sed -n 's/^.define PK_VERSION_STRING "\(.*\)"/\1/p' include/pk.h)
SOMAJOR := $(firstword $(subst ., ,$(VERSION)))
SONAME  := libpk.so.$(SOMAJOR)
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
CUDA_EMBED := include/pk.h src/pk_abi.h src/common/bf16.h src/kernels/cpu/cpu_kernels.h src/kernels/sample.h src/runtime/decode_step.h \
              src/kernels/attention_decode_layout.h src/kernels/stage_layout.h \
              src/runtime/cuda/gen_api.h $(sort $(wildcard src/kernels/cuda/*.cuh src/runtime/cuda/device/*.cuh))
LIB_OBJS  += $(BUILD)/gen/cuda_embedded.o
# libpk.so is built from the same sources compiled again with -fPIC (build/pic/), so the static
# library, the pk tool and the tests keep their non-PIC code; sanitizer builds do not build it.
PIC_OBJS  := $(LIB_OBJS:$(BUILD)/%=$(BUILD)/pic/%)
SHARED    := $(if $(SAN),,$(BUILD)/libpk.so)
TOOL_SRCS := $(sort $(wildcard tools/*.c tools/serve/*.c))
# pk serve's HTTP server; only the pk command links it, never libpk
TOOL_LDLIBS := -lmicrohttpd
TEST_SRCS := $(sort $(wildcard tests/test_*.c))
TESTS     := $(TEST_SRCS:tests/%.c=$(BUILD)/tests/%)
DEPS      := $(LIB_OBJS:.o=.d) $(TOOL_SRCS:%.c=$(BUILD)/%.d)

# tests/gpu/test_cuda_e2e runs on a GPU machine only (scripts/gpu_check.sh); built here so that
# every build compiles it.
GPU_TESTS := $(BUILD)/tests/gpu/test_cuda_e2e

all: $(BUILD)/pk $(TESTS) $(GPU_TESTS) $(SHARED)

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

$(BUILD)/pic/%.o: %.c
	@mkdir -p $(@D)
	$(CC) $(WARN) $(CPPFLAGS) $(CFLAGS) -fPIC -MMD -MP -c $< -o $@

$(BUILD)/pic/gen/cuda_embedded.o: $(BUILD)/gen/cuda_embedded.c
	@mkdir -p $(@D)
	$(CC) $(WARN) $(CPPFLAGS) $(CFLAGS) -fPIC -c $< -o $@

# libpk.so exports the functions pk.h declares and nothing else: the version script lists every
# `pk_name(` of the header. The soname links are made beside it, so `-Lbuild -lpk` works in the
# tree too.
$(BUILD)/libpk.map: include/pk.h
	@mkdir -p $(@D)
	{ echo '{ global:'; grep -oE '\bpk_[a-z0-9_]+\(' $< | tr -d '(' | sort -u | sed 's/$$/;/'; \
	  echo 'local: *; };'; } > $@.tmp && mv $@.tmp $@

$(BUILD)/libpk.so.$(VERSION): $(PIC_OBJS) $(BUILD)/libpk.objs $(BUILD)/libpk.map
	$(CC) -shared -Wl,-soname,$(SONAME) -Wl,--version-script=$(BUILD)/libpk.map -Wl,--no-undefined \
	    $(LDFLAGS) $(PIC_OBJS) $(LDLIBS) -o $@

$(BUILD)/libpk.so: $(BUILD)/libpk.so.$(VERSION)
	ln -sf libpk.so.$(VERSION) $(BUILD)/$(SONAME)
	ln -sf $(SONAME) $@

$(BUILD)/gen/cuda_embedded.c: $(CUDA_EMBED) scripts/embed_files.sh
	@mkdir -p $(@D)
	sh scripts/embed_files.sh $(CUDA_EMBED) > $@.tmp && mv $@.tmp $@

$(BUILD)/gen/cuda_embedded.o: $(BUILD)/gen/cuda_embedded.c
	$(CC) $(WARN) $(CPPFLAGS) $(CFLAGS) -c $< -o $@

$(BUILD)/pk: $(TOOL_SRCS:%.c=$(BUILD)/%.o) $(BUILD)/libpk.a
	$(CC) $(LDFLAGS) $^ $(TOOL_LDLIBS) $(LDLIBS) -o $@

$(BUILD)/tests/%: tests/%.c $(BUILD)/libpk.a tests/check.h tests/e2e_model.h tests/e2e_table.h tests/serve_client.h
	@mkdir -p $(@D)
	$(CC) $(WARN) $(CPPFLAGS) $(CFLAGS) $(LDFLAGS) $< $(filter %.o,$^) $(BUILD)/libpk.a $(LDLIBS) -o $@

# pk serve's request parser and the stop strings are the tool's, not the library's: their tests
# link them alone.
$(BUILD)/tests/test_serve_request: $(BUILD)/tools/serve/request.o
$(BUILD)/tests/test_stop_text: $(BUILD)/tools/stop_text.o

test: all
	@BUILD=$(BUILD) bash tests/run.sh

# make check installs nothing: `make deps-test` first (README).
check:
	@bash tests/check_all.sh

deps:
	@sh scripts/install_deps.sh build

deps-test:
	@sh scripts/install_deps.sh test

# pk.pc is written from pk.pc.in with the PREFIX of this install.
install: $(BUILD)/pk $(BUILD)/libpk.a $(BUILD)/libpk.so
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(LIBDIR) $(DESTDIR)$(INCLUDEDIR) $(DESTDIR)$(PKGCONFIGDIR)
	install -m 755 $(BUILD)/pk $(DESTDIR)$(BINDIR)/pk
	install -m 755 $(BUILD)/libpk.so.$(VERSION) $(DESTDIR)$(LIBDIR)/libpk.so.$(VERSION)
	ln -sf libpk.so.$(VERSION) $(DESTDIR)$(LIBDIR)/$(SONAME)
	ln -sf $(SONAME) $(DESTDIR)$(LIBDIR)/libpk.so
	install -m 644 $(BUILD)/libpk.a $(DESTDIR)$(LIBDIR)/libpk.a
	install -m 644 include/pk.h $(DESTDIR)$(INCLUDEDIR)/pk.h
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@LIBDIR@|$(LIBDIR)|' -e 's|@INCLUDEDIR@|$(INCLUDEDIR)|' \
	    -e 's|@VERSION@|$(VERSION)|' pk.pc.in > $(DESTDIR)$(PKGCONFIGDIR)/pk.pc
	@if [ -z "$(DESTDIR)" ] && [ "$$(id -u)" -eq 0 ] && command -v ldconfig >/dev/null 2>&1; then ldconfig; fi

uninstall:
	rm -f $(DESTDIR)$(BINDIR)/pk $(DESTDIR)$(LIBDIR)/libpk.so.$(VERSION) $(DESTDIR)$(LIBDIR)/$(SONAME) \
	    $(DESTDIR)$(LIBDIR)/libpk.so $(DESTDIR)$(LIBDIR)/libpk.a $(DESTDIR)$(INCLUDEDIR)/pk.h \
	    $(DESTDIR)$(PKGCONFIGDIR)/pk.pc

clean:
	rm -rf build build-address build-thread

.PHONY: all test check clean deps deps-test install uninstall FORCE
FORCE:
-include $(DEPS) $(if $(SAN),,$(PIC_OBJS:.o=.d))
