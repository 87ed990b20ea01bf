#include "kiln/core/error.h"

namespace kiln::detail {
void throw_check_failure(const char* kind, const char* file, int line, const std::string& msg) {
  throw Error(str_cat("kiln ", kind, " failed at ", file, ":", line,
                      msg.empty() ? "" : ": ", msg,
                      " (this is a bug in kiln; please report it)"));
}
}  // namespace kiln::detail
