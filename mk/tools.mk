report: build
	$(PY) bench/report.py $(REPORT_ARGS)

# Ours vs TF's built-ins on real-network layers (bench/shapes.py): table,
# bench_out/bench.{json,png}. ISA=avx2|avx512 caps ours and TF's oneDNN (forced on) at
# that level; ANCHORS=torch adds PyTorch's CPU gradients, from torch==2.13.0 in its own
# venv (the CPU build on these machines' disk; installed on first use).
TORCH_VENV ?= .venv-torch
TORCH_STAMP := $(TORCH_VENV)/.installed
$(TORCH_STAMP):
	test -x $(TORCH_VENV)/bin/python || $(PYTHON) -m venv $(TORCH_VENV)
	$(TORCH_VENV)/bin/pip install -q torch==2.13.0
	touch $@
bench: build $(if $(filter torch,$(ANCHORS)),$(TORCH_STAMP))
	$(PY) bench/bench.py $(if $(ISA),--isa $(ISA)) \
	  $(if $(ANCHORS),--anchors $(ANCHORS) --torch-python $(TORCH_VENV)/bin/python) $(BENCH_ARGS)

# A platform wheel (manylinux tag from the library's symbol versions, see
# build_tools/manylinux.py) built against the venv's TensorFlow, reusing $(BUILD_DIR);
# setuptools' folders go to a temporary directory, so runs can overlap.
WHEEL_ENV = TF_CONV_BACKPROP_BUILD_DIR=$(abspath $(BUILD_DIR)) TF_CONV_BACKPROP_BUILD_BASE=$$tmp \
            TF_CONV_BACKPROP_CUDA=$(CUDA)
wheel: build
	mkdir -p $(DIST)
	rm -f $(DIST)/tf_conv_backprop-*.whl
	tmp=$$(mktemp -d) && $(WHEEL_ENV) $(PY) -m pip wheel -q --no-build-isolation --no-deps \
	  -w $(DIST) .; rc=$$?; rm -rf $$tmp; exit $$rc
	@ls -l $(DIST)/tf_conv_backprop-*.whl

# Every supported TensorFlow (build_tools/tf_matrix.py): `make wheel TF_VERSION=V`, the
# wheel installed into a fresh venv with TF V, checked there without a compiler.
# TF_MATRIX picks versions; TF_MATRIX_CUDA=auto also builds the GPU kernels for each.
TF_MATRIX ?=
TF_MATRIX_CUDA ?= 0
tf-matrix:
	$(PYTHON) build_tools/tf_matrix.py --cuda $(TF_MATRIX_CUDA) --python $(PYTHON) \
	  $(if $(TF_MATRIX),--versions $(TF_MATRIX))

# Optional: build the library with Bazel (BUILD, WORKSPACE) against the venv's TF and
# check it in TF. Needs `bazel` (Debian: apt-get install bazel-bootstrap).
bazel-check: $(STAMP)
	$(PY) build_tools/bazel_check.py --python $(abspath $(PY)) \
	  --output-root $(abspath $(BUILD_DIR))/bazel

# Installs the CUDA toolchain now (`make build` does it when needed, once).
gpu-toolchain: $(TF_DEPS)
	$(TF_PY) build_tools/cuda_toolchain.py install --build-dir $(BUILD_DIR) \
	  --tools-dir $(CUDA_TOOLS) --clang $(CLANG_CUDA)

# On a GPU machine with CUDA's nvcc and PyTorch but no TensorFlow (e.g. a borrowed
# H200), from a plain checkout: builds the CUDA engine with that nvcc, checks every op on
# random configurations against the float64 reference (NaN-filled outputs, bitwise
# determinism), then times each op against cuDNN (PyTorch) on the benchmark shapes.
gpu-check:
	$(PYTHON) tests/core/gpu_check.py $(GPU_CHECK_ARGS)
