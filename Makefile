# The two commands of the README:
#   make demo   install the command's deps, build it, run the main job
#   make test   install deps, build, run every test (release, then the unit tests under ASan+UBSan,
#               then the data/distribute/monitor/io unit tests under ThreadSanitizer)
# Long runs live behind their own targets: make bench, make fuzz.
JOBS  ?= $(shell nproc)
BUILD ?= build
SAN   ?= build-sanitize
TSAN  ?= build-tsan
CMAKE_FLAGS ?=

.PHONY: deps configure build demo test test-release test-sanitize test-thread bench fuzz clean

# make demo installs only what building and running the command needs (DEPS=--demo, which
# make passes on to its prerequisites); make test and the rest install the test tools too.
DEPS ?=
deps:
	@scripts/deps.sh $(DEPS)

configure: deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS) >/dev/null

build: configure
	@cmake --build $(BUILD) -j $(JOBS)

# The demo installs and builds only what it runs: the strata binary and its library.
demo: DEPS = --demo
demo: configure
	@cmake --build $(BUILD) -j $(JOBS) --target strata_cli
	$(BUILD)/tools/strata/strata devices
	$(BUILD)/tools/strata/strata train

test: test-release test-sanitize test-thread

test-release: build
	ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS)

test-sanitize: deps
	@cmake -S . -B $(SAN) -DCMAKE_BUILD_TYPE=Sanitize $(CMAKE_FLAGS) >/dev/null
	@cmake --build $(SAN) -j $(JOBS) --target unit_tests
	ctest --test-dir $(SAN) --output-on-failure -j $(JOBS) -L '^unit$$'

# ThreadSanitizer over the layers with threads of their own (tests labelled "thread", target
# thread_tests; docs/testing.md). The suppressions name only third-party runtimes' internals.
test-thread: deps
	@cmake -S . -B $(TSAN) -DCMAKE_BUILD_TYPE=Thread $(CMAKE_FLAGS) >/dev/null
	@cmake --build $(TSAN) -j $(JOBS) --target thread_tests
	TSAN_OPTIONS="suppressions=$(CURDIR)/tests/tsan.supp second_deadlock_stack=1 $(TSAN_OPTIONS)" \
	  ctest --test-dir $(TSAN) --output-on-failure --no-tests=error -j $(JOBS) -L '^thread$$'

bench:
	@scripts/deps.sh --bench
	@$(MAKE) --no-print-directory build CMAKE_FLAGS="$(CMAKE_FLAGS) -DSTRATA_BENCH_LIBTORCH=ON"
	@cmake --build $(BUILD) -j $(JOBS) --target bench_programs
	bench/run_all.sh $(BUILD)

# ---- make package: the Debian packages, from the Release tree (cmake/StrataInstall.cmake) ----
# $(BUILD)/strata_<version>_amd64.deb (the command, docs; Depends: the run-time libraries) and
# $(BUILD)/strata-dev_<version>_amd64.deb (headers, libstrata.a, StrataConfig.cmake, strata.pc).
# Only the installed targets are built, not the tests.
# ---- make python-install: `import strata` for Debian's python3 (python/CMakeLists.txt) ----
# Builds the extension in the Release tree and installs the package into Debian Python's local
# site directory (/usr/local/lib/python3.11/dist-packages); docs/python.md.
.PHONY: python-install
python-install: configure
	@cmake --build $(BUILD) -j $(JOBS) --target strata_python
	cmake --install $(BUILD) --component python

.PHONY: package
package: configure
	@cmake --build $(BUILD) -j $(JOBS) --target strata_cli
	cd $(BUILD) && cpack -G DEB
	@ls $(BUILD)/strata*.deb

# libFuzzer targets under ASan+UBSan, FUZZ_SECONDS each (default 10 minutes), one after
# another over a copy of fuzz/corpus/<target>/; FUZZ_TARGETS="a_fuzz b_fuzz" picks some;
# FUZZ_MERGE=1 merges what adds coverage back into fuzz/corpus/ (minimized). `make test`
# replays every corpus (fuzz_replay.* tests); docs/testing.md has the figures of the last runs.
FUZZ_SECONDS ?= 600
FUZZ_TARGETS ?=
fuzz: deps
	@CC=clang CXX=clang++ cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=Fuzz >/dev/null
	@cmake --build build-fuzz -j $(JOBS) --target fuzz_targets
	scripts/fuzz.sh build-fuzz $(FUZZ_SECONDS) $(FUZZ_TARGETS)

clean:
	rm -rf $(BUILD) $(SAN) $(TSAN) build-fuzz
