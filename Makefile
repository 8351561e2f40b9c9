# granary - build, test, demo.  `make demo` and `make test` install what is
# missing (Debian packages, the npm S3 test server) before they run.

CC      ?= cc
PKGS    := fuse3 hiredis liblz4 libxxhash openssl libxml-2.0 jansson libcurl \
           libmicrohttpd
O       ?= build
PREFIX  ?= /usr/local
CFLAGS  ?= -O2 -g
ifeq ($(SAN),1)
CFLAGS  += -O1 -fsanitize=address,undefined -fno-omit-frame-pointer
LDFLAGS += -fsanitize=address,undefined
endif
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   := $(shell pkg-config --libs $(PKGS) 2>/dev/null)
override CFLAGS += -std=c11 -D_GNU_SOURCE -D_FILE_OFFSET_BITS=64 \
	-Wall -Wextra -Werror -pthread -MMD -MP -I. $(PKG_CFLAGS)
LDLIBS  := $(PKG_LIBS) -lpthread -lm

LIB_SRC   := $(wildcard lib/*.c fs/*.c fs/*/*.c meta/*.c gc/*.c)
TOOL_SRC  := $(wildcard tools/*.c)
UNIT_SRC  := $(wildcard tests/unit/test_*.c)
HELP_SRC  := $(wildcard tests/integ/*.c)
BENCH_SRC := $(wildcard bench/*.c)

LIB_OBJ   := $(LIB_SRC:%.c=$(O)/%.o) $(O)/meta/lua_gen.o
TOOL_OBJ  := $(TOOL_SRC:%.c=$(O)/%.o)
UNIT_BIN  := $(UNIT_SRC:tests/unit/%.c=$(O)/tests/%)
HELP_BIN  := $(HELP_SRC:tests/integ/%.c=$(O)/tests/%)
BENCH_BIN := $(BENCH_SRC:bench/%.c=$(O)/bench/%)

.PHONY: all deps test unit integ demo demo-stop bench bench-group bench-plan bench-metadata install install-python clean format check-deps check-layers

all: check-deps $(O)/granary $(O)/tests/hooks/granary $(UNIT_BIN) $(HELP_BIN) $(BENCH_BIN)

check-deps:
	@pkg-config --exists $(PKGS) || { \
	  echo "granary: build libraries are missing; run 'make deps' (or 'make test' / 'make demo', which do it)" >&2; exit 1; }

deps:
	@tools/install-deps.sh

$(O)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c -o $@ $<

# The metadata engine's Lua scripts, meta/lua/*.lua (the one list of them),
# made C strings and `enum script` in $(O)/meta/lua_gen.[ch], which meta/
# includes as "meta/lua_gen.h".
META_OBJ := $(filter $(O)/meta/%,$(LIB_OBJ))
$(O)/meta/lua_gen.c: tools/lua-embed.sh meta/lua meta/lua/lib \
		$(wildcard meta/lua/*.lua meta/lua/lib/*.lua)
	tools/lua-embed.sh meta/lua $(O)/meta
$(O)/meta/lua_gen.h: $(O)/meta/lua_gen.c ;
$(META_OBJ): override CFLAGS += -I$(O)
$(META_OBJ): $(O)/meta/lua_gen.h
$(O)/meta/lua_gen.o: $(O)/meta/lua_gen.c
	$(CC) $(CFLAGS) -c -o $@ $<

# made anew: ar keeps members it is not given (a moved or deleted file)
$(O)/libgranary.a: $(LIB_OBJ)
	@mkdir -p $(dir $@)
	@rm -f $@
	$(AR) rcs $@ $^

$(O)/granary: $(TOOL_OBJ) $(O)/libgranary.a
	$(CC) $(LDFLAGS) -o $@ $(TOOL_OBJ) $(O)/libgranary.a $(LDLIBS)

# the binary the integration tests use where they inject faults (named
# granary, as the daemon umount waits for): the same
# objects, with tests/hooks/hooks.c's hooks ahead of the library's no-ops
$(O)/tests/hooks/granary: $(TOOL_OBJ) $(O)/tests/hooks/hooks.o $(O)/libgranary.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $(TOOL_OBJ) $(O)/tests/hooks/hooks.o \
		$(O)/libgranary.a $(LDLIBS)

# the objects of tests and benchmarks are kept (make would delete them as
# intermediates of the pattern rules, and build them again every time)
.SECONDARY: $(UNIT_SRC:%.c=$(O)/%.o) $(HELP_SRC:%.c=$(O)/%.o) \
	$(BENCH_SRC:%.c=$(O)/%.o)

$(O)/tests/test_%: $(O)/tests/unit/test_%.o $(O)/libgranary.a
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS) -lcriterion

$(O)/tests/%: $(O)/tests/integ/%.o $(O)/libgranary.a
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(O)/bench/%: $(O)/bench/%.o $(O)/libgranary.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

# test: unit tests (Criterion) then integration tests on real mounts, with
# Redis and s3rver started in a temporary directory and stopped at the end;
# both run several at once (GRANARY_UNIT_JOBS, GRANARY_INTEG_JOBS).
test: deps
	@$(MAKE) --no-print-directory all
	@tests/check-layers.sh
	@tests/run-unit.sh $(O)
	@tests/integ/run.sh $(O)

check-layers:
	@tests/check-layers.sh

unit: all
	@tests/run-unit.sh $(O)

# integ T="tests/integ/tNNNN-x.sh ...": those tests only
integ: all
	@tests/integ/run.sh $(O) $(T)

# demo: a local Redis on a unix socket under $(DEMO_DIR), a file:// volume
# under it, mounted on $(MNT).  `make demo-stop` undoes it all.
DEMO_DIR ?= $(CURDIR)/.demo
MNT      ?= $(CURDIR)/mnt
demo: deps
	@$(MAKE) --no-print-directory $(O)/granary
	@tools/demo.sh start "$(DEMO_DIR)" "$(MNT)" "$(O)/granary"

demo-stop:
	@tools/demo.sh stop "$(DEMO_DIR)" "$(MNT)" "$(O)/granary"

bench: all
	@tools/install-deps.sh --bench
	@bench/run.sh $(O)
	@bench/epoch.sh $(O)
	@bench/randread.sh $(O)
	@bench/checkpoint.sh $(O)
	@bench/statlat.sh $(O)
	@bench/failover.sh $(O)
	@bench/group.sh $(O)
	@bench/plan.sh $(O)

# the cache group's benchmark alone (issue 33; about 6 minutes)
bench-group: all
	@bench/group.sh $(O)

# the epoch plan's benchmark alone (issue 34; about 8 minutes)
bench-plan: all
	@bench/plan.sh $(O)

# the metadata benchmark (issue 35; 20-40 minutes at 100,000 entries)
bench-metadata: all
	@bench/metadata.sh $(O)

# mount(8) looks for mount.TYPE helpers in /sbin, /sbin/fs.d and /sbin/fs
# only (not PATH): the helper goes to $(SBINDIR), /sbin by default whatever
# PREFIX is; it finds granary in ../bin beside itself, in PATH, or in
# /usr/local/bin and /usr/bin (docs/operations.md, "Mounting at boot").
SBINDIR ?= /sbin
install: $(O)/granary
	install -D -m 0755 $(O)/granary $(DESTDIR)$(PREFIX)/bin/granary
	install -D -m 0755 tools/mount.granary $(DESTDIR)$(SBINDIR)/mount.granary
	@$(MAKE) --no-print-directory install-python

# the Python module (tools/python, `import granary`) where $(PYTHON)'s pip
# installs by default (Debian: /usr/local/lib/python3.X/dist-packages);
# --root also lifts pip's refusal of a system Python (PEP 668) and touches
# nothing of the distribution's. Built from a copy: no build files in the tree.
PYTHON ?= python3
install-python:
	@if ! $(PYTHON) -m pip --version >/dev/null 2>&1; then \
	  echo "granary: no pip for $(PYTHON) (Debian: python3-pip): the Python module is not installed" >&2; \
	else \
	  t=$$(mktemp -d) && cp -r tools/python "$$t/" && \
	  $(PYTHON) -m pip install --quiet --no-build-isolation --no-deps --no-index \
	    --root "$(DESTDIR)/" "$$t/python"; rc=$$?; rm -rf "$$t"; exit $$rc; \
	fi

format:
	clang-format -i $(LIB_SRC) $(TOOL_SRC) $(UNIT_SRC) $(HELP_SRC) $(BENCH_SRC) \
		$(wildcard lib/*.h fs/*.h fs/*/*.h meta/*.h gc/*.h tools/*.h tests/*/*.h)

clean:
	rm -rf $(O)

-include $(shell find $(O) -name '*.d' 2>/dev/null)
