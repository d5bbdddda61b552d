# perftracker -- the two commands a newcomer needs are `make demo` and `make test`.
# CMake/ctest do the real work; this file only sequences them and installs what is missing.
#
#   make          build (release) -> build/bin/perftracker, build/python/
#   make demo     install deps, build, run the end-to-end demo and print the diagnosis
#                 (quietly: the installs and the build print one line each; errors show)
#   make test     install deps, build release + ASan/UBSan + TSan trees, run every test
#   make bench    benchmarks (ratios against baselines measured in the same run)
#   make fuzz     run each fuzz target for FUZZ_SECONDS
#   make mutate   mutation testing: MUTANTS mutants sampled over src/ (SEED), the killed share
#                 and every survivor (scripts/mutate.py; not part of `make test`)
#   make install  install the CLI and the Python collector (PREFIX=/usr/local)

BUILD      ?= build
ASAN_BUILD ?= build-asan
TSAN_BUILD ?= build-tsan
JOBS       ?= $(shell nproc)
PREFIX     ?= /usr/local
FUZZ_SECONDS ?= 60
MUTANTS    ?= 50
SEED       ?= 1
CTEST_FLAGS ?= --output-on-failure -j$(JOBS)
# QUIET=1 (make demo sets it): the build's output goes to $(BUILD)/build.log and the
# terminal gets one line, or the errors and the log's name when it fails.
QUIET      ?=

.PHONY: all build deps deps-build demo test test-asan test-tsan test-integration bench fuzz mutate install clean

all: build

deps-build:
	@scripts/install-deps.sh --build

deps:
	@scripts/install-deps.sh

# $(call quietly,LOG,COMMAND): COMMAND, its output in LOG when QUIET is set; on failure
# the lines around its errors (compiler, make, CMake) and LOG's name.
quietly = if [ -z "$(QUIET)" ]; then $(2); elif $(2) >$(1) 2>&1; then :; else \
	grep -E -B3 -A12 '(error|Error)( [0-9]+)?:|\*\*\*|CMake Error' $(1) | head -80 >&2; \
	echo "make: failed; its whole output is in $(1)" >&2; exit 1; fi

build: deps-build
	@mkdir -p $(BUILD)
	@$(call quietly,$(BUILD)/configure.log,cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release >/dev/null)
	@$(call quietly,$(BUILD)/build.log,cmake --build $(BUILD) -j$(JOBS))
	@ln -sf perftracker $(BUILD)/bin/c4d_perftracker
	@[ -z "$(QUIET)" ] || echo "make: built $(BUILD)/bin/perftracker (the build's output: $(BUILD)/build.log)"

demo: QUIET = 1
demo: deps build
	@scripts/demo.sh $(BUILD)

test: deps build test-asan test-tsan test-integration

test-asan:
	@cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DPT_SANITIZE=address,undefined >/dev/null
	@cmake --build $(ASAN_BUILD) -j$(JOBS)
	cd $(ASAN_BUILD) && ctest $(CTEST_FLAGS) -L sanitized

test-tsan:
	@cmake -S . -B $(TSAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DPT_SANITIZE=thread >/dev/null
	@cmake --build $(TSAN_BUILD) -j$(JOBS)
	cd $(TSAN_BUILD) && ctest $(CTEST_FLAGS) -L tsan

test-integration: build
	cd $(BUILD) && ctest $(CTEST_FLAGS) -L integration

bench: build
	@scripts/bench.sh $(BUILD)

fuzz: deps
	@scripts/fuzz.sh $(FUZZ_SECONDS)

# Its own tree (build-mutate, Release, incremental); each mutant's file is restored after it.
mutate: deps-build
	@nice -n 10 python3 scripts/mutate.py --sample $(MUTANTS) --seed $(SEED) --json build-mutate/results.json

install: build
	@cmake --install $(BUILD) --prefix $(PREFIX)

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(TSAN_BUILD) build-fuzz build-mutate
