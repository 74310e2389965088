# CUDA kernels (tf_ops/cuda/): CUDA=auto builds them when the toolchain (Debian
# clang-19 + pip ptxas 12.5 + TF's own CUDA 12.5 headers, see
# build_tools/cuda_toolchain.py) is installed or installable, and a CPU-only library
# otherwise; CUDA=1 requires them (CI); CUDA=0 never. `make build` says which it built
# and keeps the choice in $(BUILD_DIR)/cuda_mode. No cudart is linked: TF exports it.
CUDA ?= auto
CUDA_TOOLS ?= .cuda-toolchain
CUDA_ARCHS ?= sm_80 sm_90
CLANG_CUDA ?= clang++-19
CUDA_ROOT := $(BUILD_DIR)/cuda-root
CUDA_OBJS := $(patsubst %.cu,$(BUILD_DIR)/%.cu.o,$(CUDA_SRCS))
CUDA_INCS := -isystem $(CUDA_ROOT)/include -isystem $(CUDA_ROOT)/libcudacxx/include
# Device code for every arch in CUDA_ARCHS, PTX only for the last.
CUDA_NO_PTX := $(filter-out $(lastword $(CUDA_ARCHS)),$(CUDA_ARCHS))
CUDA_PTX_FLAGS := $(addprefix --no-cuda-include-ptx=,$(CUDA_NO_PTX))
CUDAFLAGS := -x cuda --cuda-path=$(CUDA_ROOT) $(addprefix --cuda-gpu-arch=,$(CUDA_ARCHS)) \
             $(CUDA_PTX_FLAGS) -std=c++17 -fvisibility=hidden -Wno-unknown-cuda-version \
             $(CXXFLAGS_COMMON) $(CUDA_INCS)
WITH_CUDA := $(shell cat $(BUILD_DIR)/cuda_mode 2>/dev/null)

# The engine with clang-19, the binding with GOOGLE_CUDA and CUDA's headers.
$(BUILD_DIR)/%.cu.o: %.cu $(HDRS)
	mkdir -p $(dir $@)
	$(CLANG_CUDA) $(CUDAFLAGS) -c $< -o $@
$(BUILD_DIR)/cuda/%.o: %.cc $(HDRS) $(BUILD_DIR)/tf_cflags
	mkdir -p $(dir $@)
	$(CXX) $(CXXFLAGS_COMMON) -fvisibility=hidden $$(cat $(BUILD_DIR)/tf_cflags) -DGOOGLE_CUDA=1 \
	  $(CUDA_INCS) -c $< -o $@

# The CUDA engine on the CPU emulator (tests/core/cuda_emulator.h), part of core-test.
CUDA_EMU_TEST := $(BUILD_DIR)/tests/cuda_emulated_test
CUDA_EMU_CONFIGS ?= 60
CUDA_EMU_FLAGS := -std=c++17 -O2 -Wall -Wextra -Wno-unused-parameter -Wno-sign-compare \
                  -Wno-unknown-pragmas -I. -DTCB_CUDA_EMULATION \
                  -include tests/core/cuda_emulator.h -x c++
$(BUILD_DIR)/emu/%.o: %.cu $(HDRS) tests/core/cuda_emulator.h tests/core/naive_reference.h
	mkdir -p $(dir $@)
	$(CXX) $(CUDA_EMU_FLAGS) -c $< -o $@
$(CUDA_EMU_TEST): $(patsubst %.cu,$(BUILD_DIR)/emu/%.o,$(CUDA_SRCS) tests/core/cuda_check.cu) \
                  $(BUILD_DIR)/tf_ops/core/geometry.o
	mkdir -p $(dir $@)
	$(CXX) $^ -o $@ -pthread
