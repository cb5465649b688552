# The two commands of the README:
#   make demo   install deps, build, run the main job
#   make test   install deps, build, run every test (release, then the unit tests under ASan+UBSan)
# Long runs live behind their own targets: make bench, make fuzz.
JOBS  ?= $(shell nproc)
BUILD ?= build
SAN   ?= build-sanitize
CMAKE_FLAGS ?=

.PHONY: deps configure build demo test test-release test-sanitize bench fuzz clean

deps:
	@scripts/deps.sh

configure: deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS) >/dev/null

build: configure
	@cmake --build $(BUILD) -j $(JOBS)

# The demo builds only what it runs: the strata binary and its library.
demo: configure
	@cmake --build $(BUILD) -j $(JOBS) --target strata_cli
	$(BUILD)/tools/strata/strata devices
	$(BUILD)/tools/strata/strata train

test: test-release test-sanitize

test-release: build
	ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS)

test-sanitize: deps
	@cmake -S . -B $(SAN) -DCMAKE_BUILD_TYPE=Sanitize $(CMAKE_FLAGS) >/dev/null
	@cmake --build $(SAN) -j $(JOBS) --target unit_tests
	ctest --test-dir $(SAN) --output-on-failure -j $(JOBS) -L '^unit$$'

bench:
	@scripts/deps.sh --bench
	@$(MAKE) --no-print-directory build CMAKE_FLAGS="$(CMAKE_FLAGS) -DSTRATA_BENCH_LIBTORCH=ON"
	bench/run_all.sh $(BUILD)

# ---- make package: the Debian packages, from the Release tree (cmake/StrataInstall.cmake) ----
# $(BUILD)/strata_<version>_amd64.deb (the command, docs; Depends: the run-time libraries) and
# $(BUILD)/strata-dev_<version>_amd64.deb (headers, libstrata.a, StrataConfig.cmake, strata.pc).
# Only the installed targets are built, not the tests.
.PHONY: package
package: configure
	@cmake --build $(BUILD) -j $(JOBS) --target strata_cli
	cd $(BUILD) && cpack -G DEB
	@ls $(BUILD)/strata*.deb

# libFuzzer targets under ASan+UBSan; FUZZ_SECONDS per target.
FUZZ_SECONDS ?= 600
fuzz: deps
	@CC=clang CXX=clang++ cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=Fuzz >/dev/null
	@cmake --build build-fuzz -j $(JOBS) --target fuzz_targets
	scripts/fuzz.sh build-fuzz $(FUZZ_SECONDS)

clean:
	rm -rf $(BUILD) $(SAN) build-fuzz
