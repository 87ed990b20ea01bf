#pragma once
// The demos' one-line progress display: "[=====>    ]" bars and m:ss durations.
#include <cstdint>
#include <string>

namespace kiln::demo {

std::string format_duration(double seconds);  // "3m05s"
std::string progress_bar(int64_t done, int64_t total, int width = 24);

}  // namespace kiln::demo
