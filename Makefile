# Thin wrapper over CMake. `make` builds everything into build/ (programs in build/bin/).
BUILD ?= build
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=
PREFIX ?= /usr/local
DESTDIR ?=

.PHONY: all test unit asan fuzz clean cluster install

all:
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo $(CMAKE_FLAGS) >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)

unit: all
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

# ASan + UBSan build in build-asan/ (-O1: gregord fast enough for the integration tests that run
# against it, stack traces still exact)
asan:
	@cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_FLAGS_DEBUG="-g -O1" -DGR_SANITIZE=ON >/dev/null
	@cmake --build build-asan -j $(JOBS)

# libFuzzer targets (clang, ASan + UBSan) in build-fuzz/fuzz/, and only them
fuzz:
	@CC=clang cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=Debug -DGR_SANITIZE=ON -DGR_FUZZ=ON >/dev/null
	@cmake --build build-fuzz -j $(JOBS) --target fuzz_targets

# Installs gregord, gregorctl, the systemd unit and the example configuration under
# $(DESTDIR)$(PREFIX) (see docs/OPERATIONS.md, "Multi-host deployment").
install: all
	DESTDIR="$(DESTDIR)" cmake --install $(BUILD) --prefix "$(PREFIX)"

test:
	scripts/test-all.sh

cluster:
	scripts/cluster-up.sh

clean:
	rm -rf build build-asan build-fuzz
