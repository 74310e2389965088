# The op library: the core and the binding once, the CPU kernels once per ISA level.
ISA_OBJS := $(foreach i,$(ISAS),$(BUILD_DIR)/isa/kernels_$(i).o)
# The XLA kernels also need the include roots of XLA's own third-party headers.
XLA_OBJ := $(BUILD_DIR)/tf_ops/tf/xla_kernels.o
CORE_OBJS := $(patsubst %.cc,$(BUILD_DIR)/%.o,$(CORE_SRCS)) $(ISA_OBJS)
OBJS := $(CORE_OBJS) $(patsubst %.cc,$(BUILD_DIR)/%.o,$(TF_SRCS))
# The CUDA library: the binding compiled with GOOGLE_CUDA (GPU registrations) + the engine.
CUDA_SO_OBJS := $(CORE_OBJS) $(BUILD_DIR)/tf_ops/tf/ops.o $(XLA_OBJ) \
                $(BUILD_DIR)/cuda/tf_ops/tf/kernels.o $(CUDA_OBJS)
SO_OBJS := $(if $(filter 1,$(WITH_CUDA)),$(CUDA_SO_OBJS),$(OBJS))

TF_CONFIG := $(TF_PY) build_tools/tf_config.py
TF_FLAG_FILES := $(BUILD_DIR)/tf_cflags $(BUILD_DIR)/tf_lflags $(BUILD_DIR)/tf_xla_cflags
$(TF_FLAG_FILES) &: $(TF_DEPS) build_tools/tf_config.py
	mkdir -p $(BUILD_DIR)
	$(TF_CONFIG) cflags > $(BUILD_DIR)/tf_cflags
	$(TF_CONFIG) lflags > $(BUILD_DIR)/tf_lflags
	$(TF_CONFIG) xla-cflags > $(BUILD_DIR)/tf_xla_cflags

# What the library is built against (read by the loader's version guard and by
# `python -m tf_conv_backprop info`). The CUDA build adds --cuda-version.
$(BUILD_INFO): $(BUILD_DIR)/tf_cflags build_tools/tf_config.py Makefile mk/library.mk \
               $(wildcard $(BUILD_DIR)/cuda_mode)
	$(TF_CONFIG) build-info $@ --cxx "$(CXX)" --cxxflags "$(CXXFLAGS_COMMON)" --isas "$(ISAS)" \
	  $(if $(filter 1,$(WITH_CUDA)),--cuda-version $$(cat $(BUILD_DIR)/cuda_version))

$(BUILD_DIR)/%.o: %.cc $(HDRS) $(BUILD_DIR)/tf_cflags
	mkdir -p $(dir $@)
	$(CXX) $(CXXFLAGS_COMMON) -fvisibility=hidden $$(cat $(BUILD_DIR)/tf_cflags) -c $< -o $@

$(XLA_OBJ): tf_ops/tf/xla_kernels.cc $(HDRS) $(BUILD_DIR)/tf_cflags $(BUILD_DIR)/tf_xla_cflags
	mkdir -p $(dir $@)
	$(CXX) $(CXXFLAGS_COMMON) -fvisibility=hidden $$(cat $(BUILD_DIR)/tf_cflags) \
	  $$(cat $(BUILD_DIR)/tf_xla_cflags) -c $< -o $@

# One ISA variant (out dir $(1), ISA $(2), the name of a function of the ISA giving the
# compile command $(3), extra prerequisites $(4)): its kernels compiled
# with its -m flags into namespace cpu::<isa>, partially linked, COMDAT groups dropped
# and every symbol outside cpu::<isa> made local, so no inline/template copy is shared
# between variants. The sanitizer build (mk/sanitize.mk) uses the same rules.
ISA_KEEP = '_ZN16tf_conv_backprop3cpu$(shell printf %s $(1) | wc -c)$(1)*'
define ISA_VARIANT_RULES
$(1)/isa/$(2)/%.o: %.cc $(HDRS) $(BUILD_DIR)/tf_cflags $(4)
	mkdir -p $$(dir $$@)
	$(call $(3),$(2)) -DTCB_ISA=$(2) $$$$(cat $(BUILD_DIR)/tf_cflags) -c $$< -o $$@
$(1)/isa/kernels_$(2).o: $(patsubst %.cc,$(1)/isa/$(2)/%.o,$(ISA_SRCS))
	$(LD) -r $$^ -o $$@.partial
	$(OBJCOPY) -R .group --wildcard --keep-global-symbol=$(call ISA_KEEP,$(2)) $$@.partial $$@
	rm -f $$@.partial
endef
ISA_CXX = $(CXX) $(CXXFLAGS_COMMON) -fvisibility=hidden -fno-gnu-unique -Wno-maybe-uninitialized \
          $(ISA_FLAGS_$(1))
$(foreach i,$(ISAS),$(eval $(call ISA_VARIANT_RULES,$(BUILD_DIR),$(i),ISA_CXX,)))

$(SO): $(SO_OBJS) $(BUILD_DIR)/tf_lflags $(wildcard $(BUILD_DIR)/cuda_mode)
	$(CXX) -shared $(SO_OBJS) -o $@ $$(cat $(BUILD_DIR)/tf_lflags) -Wl,-z,defs
