# tf-conv-backprop. On a fresh machine `make report` and `make test` do all set-up:
# a git-ignored virtual environment with pinned TensorFlow, then the op library.
#
#   make build    build python/tf_conv_backprop/_conv_backprop_ops.so
#   make test     core (TF-free) tests, the same under ASan + UBSan with a 60 s libFuzzer
#                 run (`make sanitize`), then the pytest suite
#   make core-test-asan / make fuzz  the sanitizer half / the fuzzer half of that
#                 (FUZZ_SECONDS=600 for a longer fuzz; clang-19 installed if missing)
#   make report   support/accuracy table for every configuration + timings vs TF
#   make bench    speed of ours vs TF's built-ins on real layers (BENCH_ARGS=--help;
#                 ISA=avx2|avx512 caps ours and TF's oneDNN, ANCHORS=torch adds PyTorch)
#   make wheel    platform wheel into dist/ (built against the venv's TensorFlow)
#   make wheel TF_VERSION=2.19.1  the same against another TensorFlow (2.16-2.21), in its
#                 own venv and build folder (.venv-tf2.19.1, build-tf2.19.1), into
#                 dist/tf2.19.1/; `make build TF_VERSION=...` builds only the library there
#   make tf-matrix  build, install and check every supported TensorFlow, each in a fresh
#                 venv (TF_MATRIX="2.16.2 ..." picks versions); prints a table
#   make bazel-check  optional: build with Bazel against the venv's TF and check it
#   make gpu-toolchain  install the CUDA toolchain (clang-19, pip ptxas 12.5) now
#   make gpu-check  on a GPU machine without TF (nvcc, PyTorch): check + time the CUDA
#                 engine
#   make clean    remove build outputs (the venv stays; `make distclean` removes it)
#
# The rules live in mk/: library.mk (the CPU library and its ISA variants), cuda.mk (the
# CUDA engine, its emulator), tests.mk (core tests, pytest), sanitize.mk (ASan + UBSan,
# libFuzzer), tools.mk (report, bench, wheel, Bazel, the GPU check).

PYTHON ?= python3
# TF_VERSION: build against that TensorFlow instead of requirements-dev.txt's, with its own
# venv and build folder; its library and build info stay in that folder, so the source
# tree's own library (the one the tests load) is untouched.
TF_VERSION ?=
ifneq ($(TF_VERSION),)
VENV ?= .venv-tf$(TF_VERSION)
BUILD_DIR ?= build-tf$(TF_VERSION)
DIST ?= dist/tf$(TF_VERSION)
SO ?= $(BUILD_DIR)/_conv_backprop_ops.so
BUILD_INFO ?= $(BUILD_DIR)/_build_info.json
VENV_REQUIREMENTS := tensorflow==$(TF_VERSION) numpy setuptools wheel
endif
VENV ?= .venv
VENV_REQUIREMENTS ?= -r requirements-dev.txt
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# Interpreter whose TensorFlow we compile against (setup.py passes its own).
TF_PY ?= $(PY)
BUILD_DIR ?= build
DIST ?= dist
CXX ?= g++
LD ?= ld
OBJCOPY ?= objcopy
JOBS ?= 2

SO ?= python/tf_conv_backprop/_conv_backprop_ops.so
BUILD_INFO ?= python/tf_conv_backprop/_build_info.json
# Source lists and ISA levels: build_tools/sources.bzl (shared with BUILD.bazel).
SOURCES = $(shell $(PYTHON) build_tools/sources.py $(1))
CORE_SRCS := $(call SOURCES,CORE_SRCS)
# The CPU kernels: compiled once per instruction set, picked at run time (tf_ops/cpu/isa.h).
ISA_SRCS := $(call SOURCES,ISA_SRCS)
ISAS := $(call SOURCES,ISA_LEVELS)
$(foreach i,$(ISAS),$(eval ISA_FLAGS_$(i) := $(call SOURCES,ISA_LEVELS $(i))))
TF_SRCS := $(call SOURCES,TF_SRCS)
CUDA_SRCS := $(call SOURCES,CUDA_SRCS)
HDRS := $(wildcard tf_ops/*/*.h tf_ops/*/*/*.h tf_ops/cpu/*.def) build_tools/sources.bzl

# Only wait for the venv when building against it.
TF_DEPS := $(if $(filter $(PY),$(TF_PY)),$(STAMP),)
CXXFLAGS_COMMON := -O3 -fPIC -Wall -Wextra -Wno-unused-parameter -Wno-sign-compare -DNDEBUG -I.

.PHONY: all build so test core-test pytest report bench clean distclean venv wheel \
        bazel-check gpu-toolchain gpu-check tf-matrix
all: build

venv: $(STAMP)
$(STAMP): requirements-dev.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q $(VENV_REQUIREMENTS)
	touch $@

build: $(TF_DEPS)
	$(TF_PY) build_tools/cuda_toolchain.py ensure --mode $(CUDA) --build-dir $(BUILD_DIR) \
	  --tools-dir $(CUDA_TOOLS) --clang $(CLANG_CUDA)
	$(MAKE) -j$(JOBS) so

so: $(SO) $(BUILD_INFO)

test: core-test sanitize pytest

include mk/cuda.mk mk/library.mk mk/tests.mk mk/sanitize.mk mk/tools.mk

clean:
	rm -rf $(BUILD_DIR) $(SO) $(BUILD_INFO) dist *.egg-info python/*.egg-info

distclean: clean
	rm -rf $(VENV) $(CUDA_TOOLS)
