# ---- Sanitizers and fuzzing: no input may crash the core ------------------------------
# One clang build of the core with ASan + UBSan (+ libFuzzer coverage) in $(SAN_DIR):
#   make core-test-asan  the core tests, then the fuzz corpus + SAN_MUTATIONS random
#                        mutations of it (tests/core/fuzz_replay_main.cc); any report fails
#   make fuzz            libFuzzer on tests/core/fuzz_geometry.cc for FUZZ_SECONDS (60),
#                        seeded from tests/core/fuzz_corpus (build_tools/gen_fuzz_corpus.py);
#                        new inputs go to $(SAN_DIR)/fuzz_work (emptied per run), a crash
#                        to $(SAN_DIR)/crash-*
#   make fuzz-deps       installs Debian's clang-19 + libclang-rt-19-dev if missing
#                        (root/sudo)
# The AVX-512 kernel variant is compiled with the AVX2 flags here (same source; its
# AVX-512-only kernel files come out empty): clang takes > 5 minutes per AVX-512 Eigen
# kernel under ASan + UBSan. To sanitize the real AVX-512 code:
#   make core-test-asan SAN_ISA_FLAGS_avx512='$(ISA_FLAGS_avx512)' (quoted).
SAN_CXX ?= clang++-19
SAN_DIR := $(BUILD_DIR)/san
SAN_FLAGS := -O1 -gline-tables-only -fno-omit-frame-pointer -fsanitize=address,undefined \
             -fno-sanitize-recover=all -fPIC -I.
SAN_ISA_FLAGS_baseline = $(ISA_FLAGS_baseline)
SAN_ISA_FLAGS_avx2 = $(ISA_FLAGS_avx2)
SAN_ISA_FLAGS_avx512 = $(ISA_FLAGS_avx2)
SAN_CORE_OBJS := $(patsubst %.cc,$(SAN_DIR)/%.o,$(CORE_SRCS)) \
                 $(foreach i,$(ISAS),$(SAN_DIR)/isa/kernels_$(i).o)
SAN_TESTS := $(patsubst tests/core/%.cc,$(SAN_DIR)/tests/%,$(wildcard tests/core/*_test.cc))
SAN_ENV := ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:strict_string_checks=1 \
           UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
SAN_MUTATIONS ?= 100000
FUZZ_SECONDS ?= 60
FUZZ_CORPUS := tests/core/fuzz_corpus
SAN_DEPS := $(SAN_DIR)/.deps-ok
SAN_RUNS := $(patsubst $(SAN_DIR)/tests/%,san-run/%,$(SAN_TESTS)) san-run/fuzz_replay \
            san-run/fuzz
SAN_CC := $(SAN_CXX) $(SAN_FLAGS) -fsanitize=fuzzer-no-link
# Recursive, so that the recipe's shell reads the flags file.
SAN_LINK = $(SAN_CXX) $(SAN_FLAGS) $$(cat $(BUILD_DIR)/tf_cflags)
.PHONY: fuzz fuzz-deps core-test-asan sanitize

SAN_PROBE := $(SAN_CXX) -fsanitize=fuzzer,address,undefined $(SAN_DIR)/probe.cc -o $(SAN_DIR)/probe
fuzz-deps: $(SAN_DEPS)
$(SAN_DEPS):
	mkdir -p $(SAN_DIR)
	printf '%s\n' 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) {' \
	  '  return 0;' '}' > $(SAN_DIR)/probe.cc
	if ! $(SAN_PROBE) 2>/dev/null; then \
	  echo "installing clang-19 + libclang-rt-19-dev (libFuzzer, ASan, UBSan runtimes)"; \
	  sudo=$$([ "$$(id -u)" = 0 ] || echo sudo); \
	  $$sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y -qq \
	    --no-install-recommends clang-19 libclang-rt-19-dev && $(SAN_PROBE); fi
	touch $@

$(SAN_DIR)/%.o: %.cc $(HDRS) $(BUILD_DIR)/tf_cflags | $(SAN_DEPS)
	mkdir -p $(dir $@)
	$(SAN_CC) $$(cat $(BUILD_DIR)/tf_cflags) -c $< -o $@
# Kernel variants as in mk/library.mk: own flags, partially linked, symbols outside
# cpu::<isa> local.
SAN_ISA_CXX = $(SAN_CC) $(SAN_ISA_FLAGS_$(1))
$(foreach i,$(ISAS),$(eval $(call ISA_VARIANT_RULES,$(SAN_DIR),$(i),SAN_ISA_CXX,| $(SAN_DEPS))))


$(SAN_DIR)/tests/%: tests/core/%.cc tests/core/naive_reference.h tests/core/expect.h $(SAN_CORE_OBJS) $(HDRS)
	mkdir -p $(dir $@)
	$(SAN_LINK) $< $(SAN_CORE_OBJS) -o $@ -pthread
FUZZ_SRCS := tests/core/fuzz_replay_main.cc tests/core/fuzz_geometry.cc
$(SAN_DIR)/fuzz_replay: $(FUZZ_SRCS) tests/core/naive_reference.h $(SAN_CORE_OBJS) $(HDRS)
	$(SAN_LINK) $(FUZZ_SRCS) $(SAN_CORE_OBJS) -o $@
$(SAN_DIR)/fuzz_geometry: tests/core/fuzz_geometry.cc tests/core/naive_reference.h \
                          $(SAN_CORE_OBJS) $(HDRS)
	$(SAN_LINK) -fsanitize=fuzzer $< $(SAN_CORE_OBJS) -o $@

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
FUZZ_STATS := '^(Done|stat::(number_of_executed_units|new_units_added|peak_rss))|seed corpus'
FUZZ_ARGS = -max_total_time=$(FUZZ_SECONDS) -max_len=512 -timeout=20 -print_final_stats=1 \
            -artifact_prefix=$(abspath $(SAN_DIR))/ fuzz_work $(abspath $(FUZZ_CORPUS))
san-run/fuzz:
	@echo "== libFuzzer, $(FUZZ_SECONDS) s, from the committed corpus"
	rm -rf $(SAN_DIR)/fuzz_work && mkdir -p $(SAN_DIR)/fuzz_work
	cd $(SAN_DIR) && if $(SAN_ENV) ./fuzz_geometry $(FUZZ_ARGS) > fuzz.log 2>&1; then \
	  grep -aE $(FUZZ_STATS) fuzz.log; \
	else tail -n 80 fuzz.log; \
	  echo "fuzz: FAILED (log $(SAN_DIR)/fuzz.log, input $(SAN_DIR)/crash-*)"; exit 1; fi
