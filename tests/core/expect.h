// The core tests' soft check: EXPECT(cond, printf-format, ...) prints a failure and
// counts it in `failures`, and the test goes on (main returns non-zero if any).
#ifndef TF_CONV_BACKPROP_TESTS_CORE_EXPECT_H_
#define TF_CONV_BACKPROP_TESTS_CORE_EXPECT_H_

#include <cstdio>

inline int failures = 0;

#define EXPECT(cond, ...)                \
  do {                                   \
    if (!(cond)) {                       \
      ++failures;                        \
      std::printf("FAIL: " __VA_ARGS__); \
      std::printf("\n");                 \
    }                                    \
  } while (0)

#endif  // TF_CONV_BACKPROP_TESTS_CORE_EXPECT_H_
