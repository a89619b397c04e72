// Deliberately bad, like tidy_control.h, which it includes: tidy_control_test.sh requires
// clang-tidy to reject both. Not built.
#include "tidy_control.h"

int tidy_control_source(const int* p) {
  if (p == 0) return 0;
  return tidy_control_header(p);
}
