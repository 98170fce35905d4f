# tubed — build, test, install.
#
#   make            build build/tubed, build/tubed-bench and build/tubed-cli
#   make run        build and start tubed on 127.0.0.1:11300
#   make check      include-graph check + unit tests (check) + integration tests
#                   + the same suite under AddressSanitizer/UBSan
#   make asan       only the sanitizer run
#   make valgrind   the protocol tests with the server under valgrind
#   make fuzz       libFuzzer harnesses for a short fixed time (clang)
#   make bench      tubed vs beanstalkd side by side (tests/bench/)
#   make install    PREFIX=/usr/local DESTDIR=
#   make clean

CC       ?= cc
PREFIX   ?= /usr/local
BINDIR   ?= $(PREFIX)/bin
MANDIR   ?= $(PREFIX)/share/man
BUILD    ?= build
# A BUILD given as an absolute path inside the tree (the install test does)
# is made relative: the .d files name their objects as $@, and a rule for
# /x/build/obj/a.o does not match build/obj/a.o, so header changes would
# stop rebuilding objects.
override BUILD := $(patsubst $(CURDIR)/%,%,$(BUILD))
VERSION  := 1.0.0

WARN     := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
            -Wno-unused-parameter
CSTD     := -std=c11 -D_GNU_SOURCE
OPT      ?= -O2 -g
SAN_FLAGS :=
SAN_DEFS :=
# Under the sanitizers every job is its own malloc (TUBED_SLAB_MALLOC), so
# ASan and LSan watch each one; tests/unit/lib/test_slab.c checks the slab itself.
ifeq ($(SAN),1)
SAN_FLAGS := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all
SAN_DEFS := -DTUBED_SLAB_MALLOC
OPT := -O1 -g
endif
CFLAGS_ALL := $(CSTD) $(WARN) $(OPT) $(SAN_FLAGS) $(SAN_DEFS) -pthread -DTUBED_VERSION='"$(VERSION)"' $(CFLAGS)
# Each object (and unit binary) records the headers it includes in a .d file
# beside it (-MMD); -MP adds an empty rule per header, so a deleted header
# does not break the next build.
DEPFLAGS   := -MMD -MP
LDFLAGS_ALL := $(SAN_FLAGS) -pthread $(LDFLAGS)

# The layers, bottom up (doc/architecture.md): lib, config, engine, net,
# proto/*; main.c wires them. Headers are included by bare name, so every
# layer's directory is on the include path.
TUBED_SRC := src
include src/layers.mk
INC       := $(TUBED_INC)
LIB_SRC   := $(TUBED_LIB_SRC)
LIB_OBJ   := $(LIB_SRC:src/%.c=$(BUILD)/obj/%.o)
BENCH_SRC := $(wildcard src/bench/*.c)
BENCH_OBJ := $(BENCH_SRC:src/bench/%.c=$(BUILD)/obj/bench/%.o)
CLI_SRC   := $(wildcard src/cli/*.c)
CLI_OBJ   := $(CLI_SRC:src/cli/%.c=$(BUILD)/obj/cli/%.o)
# Generated sources: the status page (status.html) as C, by embed.sh.
GEN_OBJ   := $(BUILD)/obj/gen/status_page.o
# Unit tests mirror src/: tests/unit/LAYER/test_MODULE.c, one check binary
# each (BUILD/unit/LAYER/test_MODULE). unit.h, shared by all, is found by
# -Itests/unit; a layer's own helpers (engine/eworld.h) sit beside its
# tests. A test still at the top (tests/unit/test_*.c) builds and runs too.
# tests/unit/cli/ tests tubed-cli's own code (its rule is below).
UNIT_DIRS := lib config engine net proto cli
UNIT_SRC  := $(wildcard tests/unit/test_*.c) \
             $(foreach d,$(UNIT_DIRS),$(wildcard tests/unit/$(d)/test_*.c))
UNIT_BIN  := $(UNIT_SRC:tests/unit/%.c=$(BUILD)/unit/%)

CHECK_CFLAGS := $(shell pkg-config --cflags check 2>/dev/null)
CHECK_LIBS   := $(shell pkg-config --libs check 2>/dev/null || echo -lcheck -lsubunit -lm -lrt -lpthread)

# Debian packages the build and the tests need (the server itself needs
# only libc at run time).
DEPS := build-essential clang pkg-config check beanstalkd ruby ruby-beaneater python3 \
        libclang-rt-14-dev dpkg-dev lintian mandoc groff-base systemd valgrind \
        prometheus chromium tmux \
        python3-pymemcache python3-memcache php-cli php-memcached libmemcached-tools memcached \
        stunnel4 openssl resource-agents keepalived iproute2
# Node.js runs npm's memcached client in the tests; a machine that has it
# (often from NodeSource, whose nodejs conflicts with Debian's npm) keeps it.
NODE_DEPS := nodejs npm

.PHONY: all run check includes unit integration asan valgrind fuzz fuzz-regress bench install clean deb deps
all: $(BUILD)/tubed $(BUILD)/tubed-bench $(BUILD)/tubed-cli

# tubed-bench is built apart from the server's layers (it reaches the one
# file it shares, numparse.h, by a relative path).
$(BUILD)/obj/bench/%.o: src/bench/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) $(DEPFLAGS) -c -o $@ $<

$(BUILD)/obj/%.o: src/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) $(DEPFLAGS) $(INC) -c -o $@ $<

# The status page is carried in the binary (src/proto/http/status_page.h).
$(BUILD)/gen/status_page.c: src/proto/http/status.html src/proto/http/embed.sh
	@mkdir -p $(dir $@)
	sh src/proto/http/embed.sh $< $@

$(BUILD)/obj/gen/status_page.o: $(BUILD)/gen/status_page.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -c -o $@ $<

# Built aside and renamed, so a concurrent make never links a half archive.
$(BUILD)/libtubed.a: $(LIB_OBJ) $(GEN_OBJ)
	rm -f $@.tmp && ar rcs $@.tmp $^ && mv -f $@.tmp $@

$(BUILD)/tubed: $(BUILD)/obj/main.o $(BUILD)/libtubed.a
	$(CC) $(LDFLAGS_ALL) -o $@ $^

# tubed-bench shares the server's number parsing and formatting.
$(BUILD)/tubed-bench: $(BENCH_OBJ) $(BUILD)/obj/lib/numparse.o
	$(CC) $(LDFLAGS_ALL) -o $@ $^ -lm

# tubed-cli, the operator's client, links only the generic library.
$(BUILD)/tubed-cli: $(CLI_OBJ) $(BUILD)/libtubed.a
	$(CC) $(LDFLAGS_ALL) -o $@ $(CLI_OBJ) $(BUILD)/libtubed.a

$(BUILD)/unit/%: tests/unit/%.c $(BUILD)/libtubed.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) $(DEPFLAGS) $(CHECK_CFLAGS) -Itests/unit $(INC) -o $@ $< $(BUILD)/libtubed.a $(LDFLAGS_ALL) $(CHECK_LIBS)

# tubed-cli's unit tests (tests/unit/cli/) link its objects but main.o.
CLI_UNIT_OBJ := $(filter-out %/main.o,$(CLI_OBJ))
$(BUILD)/unit/cli/%: tests/unit/cli/%.c $(CLI_UNIT_OBJ) $(BUILD)/libtubed.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) $(DEPFLAGS) $(CHECK_CFLAGS) -Itests/unit $(INC) -Isrc/cli -o $@ $< $(CLI_UNIT_OBJ) $(BUILD)/libtubed.a $(LDFLAGS_ALL) $(CHECK_LIBS)

# The recorded header dependencies (absent on a first build: nothing to
# rebuild then).
-include $(LIB_OBJ:.o=.d) $(BENCH_OBJ:.o=.d) $(CLI_OBJ:.o=.d) $(BUILD)/obj/main.d $(UNIT_BIN:=.d)

deps:
	@if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
	export DEBIAN_FRONTEND=noninteractive; \
	$$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq $(DEPS) >/dev/null && \
	{ command -v npm >/dev/null || $$SUDO apt-get install -y -qq $(NODE_DEPS) >/dev/null; }

run: $(BUILD)/tubed
	$(BUILD)/tubed -l 127.0.0.1 -p 11300

unit: $(UNIT_BIN)
	@set -e; for t in $(UNIT_BIN); do echo "== $$t"; CK_FORK=yes $$t; done

# The suite (every tests/integration/test_*.py), the differential test
# against Debian's beanstalkd, and a real client library.
integration: $(BUILD)/tubed $(BUILD)/tubed-bench $(BUILD)/tubed-cli
	python3 tests/integration/run.py --bin $(BUILD)/tubed
	python3 tests/integration/differential.py --bin $(BUILD)/tubed
	python3 tests/integration/client_test.py --bin $(BUILD)/tubed

# The sanitizer run builds a second tree so the normal build stays untouched.
asan:
	$(MAKE) BUILD=build/asan SAN=1 unit integration

# The protocol part of the suite with every server under valgrind's
# memcheck (any error or definite leak fails the test). Its own build, with
# jobs in plain malloc so memcheck sees each one.
VALGRIND_TESTS := test_put. test_reserve. test_jobs. test_tubes. test_stats. \
                  test_parsing. test_io. test_conns. test_wide.
valgrind:
	$(MAKE) BUILD=build/vg CFLAGS=-DTUBED_SLAB_MALLOC build/vg/tubed
	TUBED_VALGRIND=1 python3 tests/integration/run.py --bin build/vg/tubed \
	    --timeout 900 $(addprefix -k ,$(VALGRIND_TESTS))

# Every stored fuzzing input (seeds and past crashes) once, under the
# fuzzers' sanitizers, and allocation failure swept over every allocation
# of fixed sessions (beanstalk, memcache, config reloads, an HTTP scrape):
# fast; `make fuzz` is the real fuzzing.
fuzz-regress:
	$(MAKE) -C tests/fuzz regress
	$(MAKE) -C tests/fuzz sweep

# The include graph of src/ has no cycle and its layers point down
# (doc/architecture.md).
includes:
	python3 tests/lint/include_graph.py

check: includes unit integration
	$(MAKE) asan
	$(MAKE) fuzz-regress
	$(MAKE) valgrind

fuzz:
	$(MAKE) -C tests/fuzz run

bench: all
	bash tests/bench/run.sh
	python3 tests/bench/policies.py --tubed $(BUILD)/tubed --bench $(BUILD)/tubed-bench
	python3 tests/bench/drainrss.py --tubed $(BUILD)/tubed --bench $(BUILD)/tubed-bench
	BUILD=$(BUILD) bash tests/bench/memcache.sh
	python3 tests/bench/discard.py --tubed $(BUILD)/tubed
	BUILD=$(BUILD) bash tests/bench/readbehind.sh
	BUILD=$(BUILD) python3 tests/bench/access.py --tubed $(BUILD)/tubed --bench $(BUILD)/tubed-bench
	python3 tests/bench/replication.py --tubed $(BUILD)/tubed --bench $(BUILD)/tubed-bench \
	    --out $(BUILD)/bench-replication.md

deb:
	bash pkg/deb.sh

# Debian packaging passes SYSCONFDIR=/etc (pkg/deb.sh).
SYSCONFDIR ?= $(PREFIX)/etc
install: $(BUILD)/tubed $(BUILD)/tubed-bench $(BUILD)/tubed-cli
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(SYSCONFDIR)/tubed
	install -m 0755 $(BUILD)/tubed $(BUILD)/tubed-bench $(BUILD)/tubed-cli $(DESTDIR)$(BINDIR)/
	install -m 0644 man/*.1 $(DESTDIR)$(MANDIR)/man1/
	# The example config: every line commented out, so the defaults are
	# beanstalkd's. An operator's own file is never overwritten.
	[ -e $(DESTDIR)$(SYSCONFDIR)/tubed/tubed.conf ] || \
	    install -m 0644 pkg/tubed.conf $(DESTDIR)$(SYSCONFDIR)/tubed/tubed.conf

clean:
	rm -rf build
