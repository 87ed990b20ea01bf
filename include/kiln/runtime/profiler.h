#pragma once
// Op-level profiler: while started, every op call made from the outermost level of user
// code (an op called by another op's implementation counts toward its caller) is timed on
// the host and aggregated by op name and device. Kernels on the CPU are synchronous, so
// the times are the kernels' times plus dispatch; for asynchronous devices they are the
// time to enqueue. Python: kiln.profiler.profile().
#include <cstdint>
#include <string>
#include <vector>

namespace kiln::profiler {

struct OpStats {
  std::string name;    // op name, e.g. "add" or "convolution"
  std::string device;  // "cpu", "testing", ...
  int64_t calls = 0;
  double total_us = 0;  // wall time of all calls
  double max_us = 0;    // the slowest call
};

// Starts recording (clearing earlier records); an error if already started.
void start();
// Stops recording; the records stay readable until the next start().
void stop();
bool is_enabled();
// The records, slowest total first.
std::vector<OpStats> stats();
// A text table of the records (at most row_limit rows; 0: all) with a total line.
std::string table(int row_limit = 0);

}  // namespace kiln::profiler
