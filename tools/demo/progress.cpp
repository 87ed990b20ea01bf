#include "tools/demo/progress.h"

#include <cstdio>

namespace kiln::demo {

std::string format_duration(double s) {
  char buf[32];
  int m = int(s) / 60, sec = int(s) % 60;
  std::snprintf(buf, sizeof buf, "%dm%02ds", m, sec);
  return buf;
}

std::string progress_bar(int64_t done, int64_t total, int width) {
  int filled = total > 0 ? int(double(width) * double(done) / double(total)) : width;
  std::string bar(size_t(filled), '=');
  if (filled < width) bar += '>' + std::string(size_t(width - filled - 1), ' ');
  return "[" + bar + "]";
}

}  // namespace kiln::demo
