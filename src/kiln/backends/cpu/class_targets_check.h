#pragma once
// The class-index targets of nll_loss and cross_entropy_rows: every target must be
// ignore_index or a class in [0, classes), else the op's IndexError, checked before anything is
// written, on the calling thread (a check inside a parallel region could not raise).
#include <cstdint>

#include "kiln/core/error.h"

namespace kiln::cpu {

inline void check_class_targets(const int64_t* target, int64_t n, int64_t classes,
                                int64_t ignore_index, const char* op) {
  for (int64_t i = 0; i < n; ++i) {
    const int64_t c = target[i];
    KILN_CHECK(c == ignore_index || (c >= 0 && c < classes), IndexError, op, ": target ", c,
               " is out of bounds for ", classes, " classes (ignore_index is ", ignore_index,
               ")");
  }
}

}  // namespace kiln::cpu
