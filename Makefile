# tf-conv-backprop. On a fresh machine `make report` and `make test` do all set-up:
# a git-ignored virtual environment with pinned TensorFlow, then the op library.
#
#   make build    build python/tf_conv_backprop/_conv_backprop_ops.so
#   make test     core (TF-free) tests, then the pytest suite
#   make report   support/accuracy table for every configuration + timings vs TF
#   make clean    remove build outputs (the venv stays; `make distclean` removes it)

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# Interpreter whose TensorFlow we compile against (setup.py passes its own).
TF_PY ?= $(PY)
BUILD_DIR ?= build
CXX ?= g++
JOBS ?= 2

SO := python/tf_conv_backprop/_conv_backprop_ops.so
BUILD_INFO := python/tf_conv_backprop/_build_info.json
CORE_SRCS := tf_ops/core/geometry.cc tf_ops/core/cpu_engine.cc \
             tf_ops/core/conv2d_backprop_cpu.cc tf_ops/core/depthwise_backprop_cpu.cc
TF_SRCS := tf_ops/tf/ops.cc tf_ops/tf/kernels.cc
HDRS := $(wildcard tf_ops/core/*.h tf_ops/tf/*.h)
OBJS := $(patsubst %.cc,$(BUILD_DIR)/%.o,$(CORE_SRCS) $(TF_SRCS))
CORE_TESTS := $(patsubst tests/core/%.cc,$(BUILD_DIR)/tests/%,$(wildcard tests/core/*_test.cc))

# Only wait for the venv when building against it.
TF_DEPS := $(if $(filter $(PY),$(TF_PY)),$(STAMP),)
CXXFLAGS_COMMON := -O3 -fPIC -Wall -Wextra -Wno-unused-parameter -Wno-sign-compare -DNDEBUG -I.

.PHONY: all build so test core-test pytest report bench clean distclean venv
all: build

venv: $(STAMP)
$(STAMP): requirements-dev.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -r requirements-dev.txt
	touch $@

build: $(TF_DEPS)
	$(MAKE) -j$(JOBS) so

so: $(SO) $(BUILD_INFO)

$(BUILD_DIR)/tf_cflags $(BUILD_DIR)/tf_lflags &: $(TF_DEPS) build_tools/tf_config.py
	mkdir -p $(BUILD_DIR)
	$(TF_PY) build_tools/tf_config.py cflags > $(BUILD_DIR)/tf_cflags
	$(TF_PY) build_tools/tf_config.py lflags > $(BUILD_DIR)/tf_lflags

$(BUILD_INFO): $(BUILD_DIR)/tf_cflags
	$(TF_PY) build_tools/tf_config.py build-info $@

$(BUILD_DIR)/%.o: %.cc $(HDRS) $(BUILD_DIR)/tf_cflags
	mkdir -p $(dir $@)
	$(CXX) $(CXXFLAGS_COMMON) -fvisibility=hidden $$(cat $(BUILD_DIR)/tf_cflags) -c $< -o $@

$(SO): $(OBJS) $(BUILD_DIR)/tf_lflags
	$(CXX) -shared $(OBJS) -o $@ $$(cat $(BUILD_DIR)/tf_lflags) -Wl,-z,defs

# Standalone tests of the framework-free core (no TensorFlow linked; Eigen
# headers come from TF's include dir).
$(BUILD_DIR)/tests/%: tests/core/%.cc tests/core/naive_reference.h $(CORE_SRCS) $(HDRS) $(BUILD_DIR)/tf_cflags
	mkdir -p $(dir $@)
	$(CXX) $(CXXFLAGS_COMMON) $$(cat $(BUILD_DIR)/tf_cflags) $< $(CORE_SRCS) -o $@ -pthread

core-test: $(TF_DEPS)
	$(MAKE) -j$(JOBS) $(CORE_TESTS)
	for t in $(CORE_TESTS); do echo "== $$t"; $$t || exit 1; done

pytest: build
	$(PY) -m pytest tests $(PYTEST_ARGS)

test: core-test pytest

report: build
	$(PY) bench/report.py $(REPORT_ARGS)

clean:
	rm -rf $(BUILD_DIR) $(SO) $(BUILD_INFO) dist *.egg-info python/*.egg-info

distclean: clean
	rm -rf $(VENV)
