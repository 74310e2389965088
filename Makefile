# tf-conv-backprop. On a fresh machine `make report` and `make test` do all set-up:
# a git-ignored virtual environment with pinned TensorFlow, then the op library.
#
#   make build    build python/tf_conv_backprop/_conv_backprop_ops.so
#   make test     core (TF-free) tests, the same under ASan + UBSan with a 60 s libFuzzer
#                 run (`make sanitize`), then the pytest suite
#   make core-test-asan / make fuzz  the sanitizer half / the fuzzer half of that
#                 (FUZZ_SECONDS=600 for a longer fuzz; clang-19 installed if missing)
#   make report   support/accuracy table for every configuration + timings vs TF
#   make bench    speed of ours vs TF's built-ins on real layers (BENCH_ARGS=--help)
#   make wheel    platform wheel into dist/ (built against the venv's TensorFlow)
#   make bazel-check  optional: build with Bazel against the venv's TF and check it
#   make gpu-toolchain  install the CUDA toolchain (clang-19, pip ptxas 12.5) now
#   make gpu-check  on a GPU machine without TF (nvcc, PyTorch): check + time the CUDA engine
#   make clean    remove build outputs (the venv stays; `make distclean` removes it)

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# Interpreter whose TensorFlow we compile against (setup.py passes its own).
TF_PY ?= $(PY)
BUILD_DIR ?= build
DIST ?= dist
CXX ?= g++
JOBS ?= 2

SO := python/tf_conv_backprop/_conv_backprop_ops.so
BUILD_INFO := python/tf_conv_backprop/_build_info.json
# Source lists and ISA levels: build_tools/sources.bzl (shared with BUILD.bazel).
SOURCES = $(shell $(PYTHON) build_tools/sources.py $(1))
CORE_SRCS := $(call SOURCES,CORE_SRCS)
# The CPU kernels: compiled once per instruction set and picked at run time (tf_ops/cpu/isa.h).
ISA_SRCS := $(call SOURCES,ISA_SRCS)
ISAS := $(call SOURCES,ISA_LEVELS)
$(foreach i,$(ISAS),$(eval ISA_FLAGS_$(i) := $(call SOURCES,ISA_LEVELS $(i))))
ISA_OBJS := $(foreach i,$(ISAS),$(BUILD_DIR)/isa/kernels_$(i).o)
TF_SRCS := $(call SOURCES,TF_SRCS)
# The XLA kernels also need the include roots of XLA's own third-party headers.
XLA_OBJ := $(BUILD_DIR)/tf_ops/tf/xla_kernels.o
HDRS := $(wildcard tf_ops/*/*.h tf_ops/*/*/*.h tf_ops/cpu/*.def) build_tools/sources.bzl
CORE_OBJS := $(patsubst %.cc,$(BUILD_DIR)/%.o,$(CORE_SRCS)) $(ISA_OBJS)
OBJS := $(CORE_OBJS) $(patsubst %.cc,$(BUILD_DIR)/%.o,$(TF_SRCS))
LD ?= ld
OBJCOPY ?= objcopy
CORE_TESTS := $(patsubst tests/core/%.cc,$(BUILD_DIR)/tests/%,$(wildcard tests/core/*_test.cc))

# Only wait for the venv when building against it.
TF_DEPS := $(if $(filter $(PY),$(TF_PY)),$(STAMP),)
CXXFLAGS_COMMON := -O3 -fPIC -Wall -Wextra -Wno-unused-parameter -Wno-sign-compare -DNDEBUG -I.

# CUDA kernels (tf_ops/cuda/): CUDA=auto builds them when the
# toolchain (Debian clang-19 + pip ptxas 12.5 + TF's own CUDA 12.5 headers, see
# build_tools/cuda_toolchain.py) is installed or installable, and a CPU-only library
# otherwise; CUDA=1 requires them (CI); CUDA=0 never. `make build` says which it built
# and keeps the choice in $(BUILD_DIR)/cuda_mode. No cudart is linked: TF exports it.
CUDA ?= auto
CUDA_TOOLS ?= .cuda-toolchain
CUDA_ARCHS ?= sm_80 sm_90
CLANG_CUDA ?= clang++-19
CUDA_ROOT := $(BUILD_DIR)/cuda-root
CUDA_SRCS := $(call SOURCES,CUDA_SRCS)
CUDA_OBJS := $(patsubst %.cu,$(BUILD_DIR)/%.cu.o,$(CUDA_SRCS))
CUDA_INCS := -isystem $(CUDA_ROOT)/include -isystem $(CUDA_ROOT)/libcudacxx/include
CUDAFLAGS := -x cuda --cuda-path=$(CUDA_ROOT) $(addprefix --cuda-gpu-arch=,$(CUDA_ARCHS)) -std=c++17 \
             $(addprefix --no-cuda-include-ptx=,$(filter-out $(lastword $(CUDA_ARCHS)),$(CUDA_ARCHS))) \
             -fvisibility=hidden -Wno-unknown-cuda-version $(CXXFLAGS_COMMON) $(CUDA_INCS)
WITH_CUDA := $(shell cat $(BUILD_DIR)/cuda_mode 2>/dev/null)
# The CUDA library: the binding compiled with GOOGLE_CUDA (GPU registrations) + the engine.
SO_OBJS := $(if $(filter 1,$(WITH_CUDA)),$(CORE_OBJS) $(BUILD_DIR)/tf_ops/tf/ops.o $(XLA_OBJ) \
             $(BUILD_DIR)/cuda/tf_ops/tf/kernels.o $(CUDA_OBJS),$(OBJS))
# The CUDA engine on the CPU emulator (tests/core/cuda_emulator.h), part of core-test.
CUDA_EMU_TEST := $(BUILD_DIR)/tests/cuda_emulated_test
CUDA_EMU_CONFIGS ?= 60
CUDA_EMU_FLAGS := -std=c++17 -O2 -Wall -Wextra -Wno-unused-parameter -Wno-sign-compare -Wno-unknown-pragmas \
                  -I. -DTCB_CUDA_EMULATION -include tests/core/cuda_emulator.h -x c++

.PHONY: all build so test core-test pytest report bench clean distclean venv wheel bazel-check gpu-toolchain gpu-check
all: build

venv: $(STAMP)
$(STAMP): requirements-dev.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -r requirements-dev.txt
	touch $@

build: $(TF_DEPS)
	$(TF_PY) build_tools/cuda_toolchain.py ensure --mode $(CUDA) --build-dir $(BUILD_DIR) --tools-dir $(CUDA_TOOLS) --clang $(CLANG_CUDA)
	$(MAKE) -j$(JOBS) so

so: $(SO) $(BUILD_INFO)

$(BUILD_DIR)/tf_cflags $(BUILD_DIR)/tf_lflags $(BUILD_DIR)/tf_xla_cflags &: $(TF_DEPS) build_tools/tf_config.py
	mkdir -p $(BUILD_DIR)
	$(TF_PY) build_tools/tf_config.py cflags > $(BUILD_DIR)/tf_cflags
	$(TF_PY) build_tools/tf_config.py lflags > $(BUILD_DIR)/tf_lflags
	$(TF_PY) build_tools/tf_config.py xla-cflags > $(BUILD_DIR)/tf_xla_cflags

# What the library is built against (read by the loader's version guard and by
# `python -m tf_conv_backprop info`). The CUDA build adds --cuda-version.
$(BUILD_INFO): $(BUILD_DIR)/tf_cflags build_tools/tf_config.py Makefile $(wildcard $(BUILD_DIR)/cuda_mode)
	$(TF_PY) build_tools/tf_config.py build-info $@ --cxx "$(CXX)" --cxxflags "$(CXXFLAGS_COMMON)" --isas "$(ISAS)" \
	  $(if $(filter 1,$(WITH_CUDA)),--cuda-version $$(cat $(BUILD_DIR)/cuda_version))

$(BUILD_DIR)/%.o: %.cc $(HDRS) $(BUILD_DIR)/tf_cflags
	mkdir -p $(dir $@)
	$(CXX) $(CXXFLAGS_COMMON) -fvisibility=hidden $$(cat $(BUILD_DIR)/tf_cflags) -c $< -o $@

$(XLA_OBJ): tf_ops/tf/xla_kernels.cc $(HDRS) $(BUILD_DIR)/tf_cflags $(BUILD_DIR)/tf_xla_cflags
	mkdir -p $(dir $@)
	$(CXX) $(CXXFLAGS_COMMON) -fvisibility=hidden $$(cat $(BUILD_DIR)/tf_cflags) $$(cat $(BUILD_DIR)/tf_xla_cflags) -c $< -o $@

# One ISA variant: its kernels compiled with its -m flags into namespace
# cpu::<isa>, partially linked, COMDAT groups dropped and every symbol outside
# cpu::<isa> made local, so no inline/template copy is shared between variants.
define ISA_RULES
$(BUILD_DIR)/isa/$(1)/%.o: %.cc $(HDRS) $(BUILD_DIR)/tf_cflags
	mkdir -p $$(dir $$@)
	$(CXX) $(CXXFLAGS_COMMON) -fvisibility=hidden -fno-gnu-unique -Wno-maybe-uninitialized $(ISA_FLAGS_$(1)) -DTCB_ISA=$(1) $$$$(cat $(BUILD_DIR)/tf_cflags) -c $$< -o $$@
$(BUILD_DIR)/isa/kernels_$(1).o: $(patsubst %.cc,$(BUILD_DIR)/isa/$(1)/%.o,$(ISA_SRCS))
	$(LD) -r $$^ -o $$@.partial
	$(OBJCOPY) -R .group --wildcard --keep-global-symbol='_ZN16tf_conv_backprop3cpu$(shell printf %s $(1) | wc -c)$(1)*' $$@.partial $$@
	rm -f $$@.partial
endef
$(foreach i,$(ISAS),$(eval $(call ISA_RULES,$(i))))

$(SO): $(SO_OBJS) $(BUILD_DIR)/tf_lflags $(wildcard $(BUILD_DIR)/cuda_mode)
	$(CXX) -shared $(SO_OBJS) -o $@ $$(cat $(BUILD_DIR)/tf_lflags) -Wl,-z,defs

# CUDA: the engine with clang-19 (device code for $(CUDA_ARCHS) + PTX), the binding with
# GOOGLE_CUDA and CUDA's headers.
$(BUILD_DIR)/%.cu.o: %.cu $(HDRS)
	mkdir -p $(dir $@)
	$(CLANG_CUDA) $(CUDAFLAGS) -c $< -o $@
$(BUILD_DIR)/cuda/%.o: %.cc $(HDRS) $(BUILD_DIR)/tf_cflags
	mkdir -p $(dir $@)
	$(CXX) $(CXXFLAGS_COMMON) -fvisibility=hidden $$(cat $(BUILD_DIR)/tf_cflags) -DGOOGLE_CUDA=1 $(CUDA_INCS) -c $< -o $@

$(BUILD_DIR)/emu/%.o: %.cu $(HDRS) tests/core/cuda_emulator.h tests/core/naive_reference.h
	mkdir -p $(dir $@)
	$(CXX) $(CUDA_EMU_FLAGS) -c $< -o $@
$(CUDA_EMU_TEST): $(patsubst %.cu,$(BUILD_DIR)/emu/%.o,$(CUDA_SRCS) tests/core/cuda_check.cu) $(BUILD_DIR)/tf_ops/core/geometry.o
	mkdir -p $(dir $@)
	$(CXX) $^ -o $@ -pthread

# Standalone tests of the framework-free core (no TensorFlow linked; Eigen
# headers come from TF's include dir).
$(BUILD_DIR)/tests/%: tests/core/%.cc tests/core/naive_reference.h $(CORE_OBJS) $(HDRS) $(BUILD_DIR)/tf_cflags
	mkdir -p $(dir $@)
	$(CXX) $(CXXFLAGS_COMMON) $$(cat $(BUILD_DIR)/tf_cflags) $< $(CORE_OBJS) -o $@ -pthread

core-test: $(TF_DEPS)
	$(MAKE) -j$(JOBS) $(CORE_TESTS) $(CUDA_EMU_TEST)
	for t in $(CORE_TESTS); do echo "== $$t"; $$t || exit 1; done
	$(CUDA_EMU_TEST) $(CUDA_EMU_CONFIGS)
	$(PYTHON) tests/core/check_isa_isolation.py $(firstword $(CORE_TESTS)) $(ISA_OBJS)

pytest: build
	TF_CONV_BACKPROP_EXPECT_CUDA=$(if $(filter 1,$(CUDA)),1,0) $(PY) -m pytest tests $(PYTEST_ARGS)

test: core-test sanitize pytest

# ---- Sanitizers and fuzzing: no input may crash the core ------------------------------
# One clang build of the core with ASan + UBSan (+ libFuzzer coverage) in $(SAN_DIR):
#   make core-test-asan  the core tests, then the fuzz corpus + SAN_MUTATIONS random
#                        mutations of it (tests/core/fuzz_replay_main.cc); any report fails
#   make fuzz            libFuzzer on tests/core/fuzz_geometry.cc for FUZZ_SECONDS (60),
#                        seeded from tests/core/fuzz_corpus (build_tools/gen_fuzz_corpus.py);
#                        new inputs go to $(SAN_DIR)/fuzz_work (emptied per run), a crash
#                        to $(SAN_DIR)/crash-*
#   make fuzz-deps       installs Debian's clang-19 + libclang-rt-19-dev if missing (root/sudo)
# The AVX-512 kernel variant is compiled with the AVX2 flags here (same source): clang
# takes > 5 minutes per AVX-512 Eigen kernel under ASan + UBSan. To sanitize the real
# AVX-512 code: make core-test-asan SAN_ISA_FLAGS_avx512='$(ISA_FLAGS_avx512)' (quoted).
SAN_CXX ?= clang++-19
SAN_DIR := $(BUILD_DIR)/san
SAN_FLAGS := -O1 -gline-tables-only -fno-omit-frame-pointer -fsanitize=address,undefined \
             -fno-sanitize-recover=all -fPIC -I.
SAN_ISA_FLAGS_baseline = $(ISA_FLAGS_baseline)
SAN_ISA_FLAGS_avx2 = $(ISA_FLAGS_avx2)
SAN_ISA_FLAGS_avx512 = $(ISA_FLAGS_avx2)
SAN_CORE_OBJS := $(patsubst %.cc,$(SAN_DIR)/%.o,$(CORE_SRCS)) $(foreach i,$(ISAS),$(SAN_DIR)/isa/kernels_$(i).o)
SAN_TESTS := $(patsubst tests/core/%.cc,$(SAN_DIR)/tests/%,$(wildcard tests/core/*_test.cc))
SAN_ENV := ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:strict_string_checks=1 \
           UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
SAN_MUTATIONS ?= 100000
FUZZ_SECONDS ?= 60
FUZZ_CORPUS := tests/core/fuzz_corpus
SAN_DEPS := $(SAN_DIR)/.deps-ok
SAN_RUNS := $(patsubst $(SAN_DIR)/tests/%,san-run/%,$(SAN_TESTS)) san-run/fuzz_replay san-run/fuzz
.PHONY: fuzz fuzz-deps core-test-asan sanitize

fuzz-deps: $(SAN_DEPS)
$(SAN_DEPS):
	mkdir -p $(SAN_DIR)
	printf 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }\n' > $(SAN_DIR)/probe.cc
	if ! $(SAN_CXX) -fsanitize=fuzzer,address,undefined $(SAN_DIR)/probe.cc -o $(SAN_DIR)/probe 2>/dev/null; then \
	  echo "installing clang-19 + libclang-rt-19-dev (libFuzzer, ASan, UBSan runtimes)"; \
	  sudo=$$([ "$$(id -u)" = 0 ] || echo sudo); \
	  $$sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y -qq --no-install-recommends clang-19 libclang-rt-19-dev && \
	  $(SAN_CXX) -fsanitize=fuzzer,address,undefined $(SAN_DIR)/probe.cc -o $(SAN_DIR)/probe; fi
	touch $@

$(SAN_DIR)/%.o: %.cc $(HDRS) $(BUILD_DIR)/tf_cflags | $(SAN_DEPS)
	mkdir -p $(dir $@)
	$(SAN_CXX) $(SAN_FLAGS) -fsanitize=fuzzer-no-link $$(cat $(BUILD_DIR)/tf_cflags) -c $< -o $@
# Kernel variants as in ISA_RULES: own flags, partially linked, symbols outside cpu::<isa> local.
define SAN_ISA_RULES
$(SAN_DIR)/isa/$(1)/%.o: %.cc $(HDRS) $(BUILD_DIR)/tf_cflags | $(SAN_DEPS)
	mkdir -p $$(dir $$@)
	$(SAN_CXX) $(SAN_FLAGS) -fsanitize=fuzzer-no-link $$(SAN_ISA_FLAGS_$(1)) -DTCB_ISA=$(1) $$$$(cat $(BUILD_DIR)/tf_cflags) -c $$< -o $$@
$(SAN_DIR)/isa/kernels_$(1).o: $(patsubst %.cc,$(SAN_DIR)/isa/$(1)/%.o,$(ISA_SRCS))
	$(LD) -r $$^ -o $$@.partial
	$(OBJCOPY) -R .group --wildcard --keep-global-symbol='_ZN16tf_conv_backprop3cpu$(shell printf %s $(1) | wc -c)$(1)*' $$@.partial $$@
	rm -f $$@.partial
endef
$(foreach i,$(ISAS),$(eval $(call SAN_ISA_RULES,$(i))))

$(SAN_DIR)/tests/%: tests/core/%.cc tests/core/naive_reference.h $(SAN_CORE_OBJS) $(HDRS)
	mkdir -p $(dir $@)
	$(SAN_CXX) $(SAN_FLAGS) $$(cat $(BUILD_DIR)/tf_cflags) $< $(SAN_CORE_OBJS) -o $@ -pthread
$(SAN_DIR)/fuzz_replay: tests/core/fuzz_replay_main.cc tests/core/fuzz_geometry.cc tests/core/naive_reference.h $(SAN_CORE_OBJS) $(HDRS)
	$(SAN_CXX) $(SAN_FLAGS) $$(cat $(BUILD_DIR)/tf_cflags) tests/core/fuzz_replay_main.cc tests/core/fuzz_geometry.cc $(SAN_CORE_OBJS) -o $@
$(SAN_DIR)/fuzz_geometry: tests/core/fuzz_geometry.cc tests/core/naive_reference.h $(SAN_CORE_OBJS) $(HDRS)
	$(SAN_CXX) $(SAN_FLAGS) -fsanitize=fuzzer $$(cat $(BUILD_DIR)/tf_cflags) $< $(SAN_CORE_OBJS) -o $@

core-test-asan: $(TF_DEPS)
	$(MAKE) -j$(JOBS) $(SAN_TESTS) $(SAN_DIR)/fuzz_replay
	$(MAKE) -j$(JOBS) --output-sync=target $(filter-out san-run/fuzz,$(SAN_RUNS))

fuzz: $(TF_DEPS)
	$(MAKE) -j$(JOBS) $(SAN_DIR)/fuzz_geometry
	$(MAKE) san-run/fuzz

# Both at once, JOBS runs at a time (`make test`).
sanitize: $(TF_DEPS)
	$(MAKE) -j$(JOBS) $(SAN_TESTS) $(SAN_DIR)/fuzz_replay $(SAN_DIR)/fuzz_geometry
	$(MAKE) -j$(JOBS) --output-sync=target $(SAN_RUNS)

# One sanitized run each (not files; never present, so always run).
san-run/%:
	@echo "== $* (ASan + UBSan)"
	@if $(SAN_ENV) $(SAN_DIR)/tests/$* > $(SAN_DIR)/$*.log 2>&1; then tail -n 2 $(SAN_DIR)/$*.log; \
	else cat $(SAN_DIR)/$*.log; echo "$*: FAILED under ASan + UBSan"; exit 1; fi
san-run/fuzz_replay:
	@echo "== fuzz_replay (ASan + UBSan): the seed corpus + $(SAN_MUTATIONS) mutations"
	$(SAN_ENV) $(SAN_DIR)/fuzz_replay --mutations $(SAN_MUTATIONS) $(FUZZ_CORPUS)
san-run/fuzz:
	@echo "== libFuzzer, $(FUZZ_SECONDS) s, from the committed corpus"
	rm -rf $(SAN_DIR)/fuzz_work && mkdir -p $(SAN_DIR)/fuzz_work
	cd $(SAN_DIR) && if $(SAN_ENV) ./fuzz_geometry -max_total_time=$(FUZZ_SECONDS) -max_len=512 -timeout=20 \
	  -print_final_stats=1 -artifact_prefix=$(abspath $(SAN_DIR))/ fuzz_work $(abspath $(FUZZ_CORPUS)) \
	  > fuzz.log 2>&1; then grep -aE '^(Done|stat::(number_of_executed_units|new_units_added|peak_rss))|seed corpus' fuzz.log; \
	else tail -n 80 fuzz.log; echo "fuzz: FAILED (log $(SAN_DIR)/fuzz.log, input $(SAN_DIR)/crash-*)"; exit 1; fi

report: build
	$(PY) bench/report.py $(REPORT_ARGS)

# Ours vs TF's built-ins on the issue-3 layers: table, bench_out/bench.{json,png}.
bench: build
	$(PY) bench/bench.py $(BENCH_ARGS)

# A platform wheel (manylinux tag from the library's symbol versions, see
# build_tools/manylinux.py) built against the venv's TensorFlow, reusing $(BUILD_DIR);
# setuptools' folders go to a temporary directory, so runs can overlap.
wheel: build
	mkdir -p $(DIST)
	rm -f $(DIST)/tf_conv_backprop-*.whl
	tmp=$$(mktemp -d) && TF_CONV_BACKPROP_BUILD_DIR=$(abspath $(BUILD_DIR)) TF_CONV_BACKPROP_BUILD_BASE=$$tmp \
	  $(PY) -m pip wheel -q --no-build-isolation --no-deps -w $(DIST) .; rc=$$?; rm -rf $$tmp; exit $$rc
	@ls -l $(DIST)/tf_conv_backprop-*.whl

# Optional: build the library with Bazel (BUILD, WORKSPACE) against the venv's TF and
# check it in TF. Needs `bazel` (Debian: apt-get install bazel-bootstrap).
bazel-check: $(STAMP)
	$(PY) build_tools/bazel_check.py --python $(abspath $(PY)) --output-root $(abspath $(BUILD_DIR))/bazel

# Installs the CUDA toolchain now (`make build` does it when needed, once).
gpu-toolchain: $(TF_DEPS)
	$(TF_PY) build_tools/cuda_toolchain.py install --build-dir $(BUILD_DIR) --tools-dir $(CUDA_TOOLS) --clang $(CLANG_CUDA)

# On a GPU machine with CUDA's nvcc and PyTorch but no TensorFlow (e.g. the borrowed
# H200), from a plain checkout: builds the CUDA engine with that nvcc, checks every op on
# random configurations against the float64 reference (NaN-filled outputs, bitwise
# determinism), then times each op against cuDNN (PyTorch) on the benchmark shapes.
gpu-check:
	$(PYTHON) tests/core/gpu_check.py $(GPU_CHECK_ARGS)

clean:
	rm -rf $(BUILD_DIR) $(SO) $(BUILD_INFO) dist *.egg-info python/*.egg-info

distclean: clean
	rm -rf $(VENV) $(CUDA_TOOLS)
