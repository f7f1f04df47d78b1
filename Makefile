# rocemu: the two commands a user needs, and a few more.
#   make demo   install what is missing, build, run the demo
#   make test   install what is missing, build (plain and ASan/UBSan), run every suite
#   make format-check   every tracked C file as .clang-format wants it (CI runs it)
BUILD      ?= build
ASAN_BUILD ?= build-asan
MESON_OPTS ?=

# Debian 12 packages: build tools and libraries, then what tests and the demo run.
# libclang-rt-14-dev holds clang's ASan/UBSan runtime: clang only Recommends it and
# install-deps.sh installs without Recommends. qemu-system-x86, busybox-static, cpio,
# kmod and ibverbs-providers (rdma_rxe's user-space driver): the Soft-RoCE guest of
# tests/interop.
DEB_BUILD = build-essential pkg-config meson ninja-build clang libclang-rt-14-dev clang-format \
            dpdk-dev libdpdk-dev libbpf-dev libpcap-dev libcmocka-dev libibverbs-dev librdmacm-dev
DEB_RUN   = ibverbs-utils perftest qperf python3-pyverbs tshark python3-scapy rdmacm-utils \
            iproute2 iputils-ping iputils-arping procps nftables man-db \
            ucx-utils libfabric-bin openmpi-bin libopenmpi-dev librpma-dev \
            qemu-system-x86 busybox-static cpio kmod ibverbs-providers
DEB_PKGS  = $(DEB_BUILD) $(DEB_RUN)

.PHONY: all deps build build-asan demo test test-unit conformance bench clean format format-check

all: build

deps:
	@scripts/install-deps.sh $(DEB_PKGS)

$(BUILD)/build.ninja:
	meson setup $(BUILD) $(MESON_OPTS)

$(ASAN_BUILD)/build.ninja:
	CC=clang meson setup $(ASAN_BUILD) -Db_sanitize=address,undefined -Db_lundef=false $(MESON_OPTS)

build: deps $(BUILD)/build.ninja
	ninja -C $(BUILD)

build-asan: deps $(ASAN_BUILD)/build.ninja
	ninja -C $(ASAN_BUILD)

demo: build
	mkdir -p pcaps/demo
	$(BUILD)/tools/rocemu demo --dir pcaps/demo

test: build build-asan
	scripts/run-tests.sh $(BUILD) $(ASAN_BUILD)

test-unit: build
	meson test -C $(BUILD) --suite unit --print-errorlogs

conformance: build
	ninja -C $(BUILD) conformance

bench: build
	scripts/run-bench.sh $(BUILD)

format:
	git ls-files '*.c' '*.h' | xargs clang-format -i

# What CI checks: every tracked C file as .clang-format wants it. A drift names the
# file and line; `make format` mends it.
format-check: deps
	git ls-files '*.c' '*.h' | xargs clang-format --dry-run -Werror

clean:
	rm -rf $(BUILD) $(ASAN_BUILD)
