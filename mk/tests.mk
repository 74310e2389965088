# Standalone tests of the framework-free core (no TensorFlow linked; Eigen headers come
# from TF's include dir), the CUDA emulator run, the ISA isolation check; pytest.
CORE_TESTS := $(patsubst tests/core/%.cc,$(BUILD_DIR)/tests/%,$(wildcard tests/core/*_test.cc))

$(BUILD_DIR)/tests/%: tests/core/%.cc tests/core/naive_reference.h tests/core/expect.h $(CORE_OBJS) $(HDRS) \
                      $(BUILD_DIR)/tf_cflags
	mkdir -p $(dir $@)
	$(CXX) $(CXXFLAGS_COMMON) $$(cat $(BUILD_DIR)/tf_cflags) $< $(CORE_OBJS) -o $@ -pthread

core-test: $(TF_DEPS)
	$(MAKE) -j$(JOBS) $(CORE_TESTS) $(CUDA_EMU_TEST)
	for t in $(CORE_TESTS); do echo "== $$t"; $$t || exit 1; done
	$(CUDA_EMU_TEST) $(CUDA_EMU_CONFIGS)
	$(PYTHON) tests/core/check_isa_isolation.py $(firstword $(CORE_TESTS)) $(ISA_OBJS)

pytest: build
	TF_CONV_BACKPROP_EXPECT_CUDA=$(if $(filter 1,$(CUDA)),1,0) $(PY) -m pytest tests $(PYTEST_ARGS)
