// Deliberately bad: tidy_control_test.sh puts this header into each layer's folder of a
// scratch tree and requires clang-tidy to reject it (0 for a null pointer, an if without
// braces). Never included by rdmanet.
#pragma once

inline int tidy_control_header(const int* p) {
  if (p == 0) return 1;
  return *p;
}
