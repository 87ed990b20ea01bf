#pragma once
// Op-level profiler: while started, every op call made from the outermost level of user
// code (an op called by another op's implementation counts toward its caller) is timed on
// the host and aggregated by op name and device; with Options::trace, each call is also
// kept as an event (start, duration, thread, and with record_shapes its inputs' shapes and
// dtypes), for timelines (chrome trace), grouping by input shape and FLOP counts. Kernels on
// the CPU are synchronous, so the times are the kernels' times plus dispatch; for
// asynchronous devices they are the time to enqueue. Python: kiln.profiler.profile().
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

// One op call (Options::trace).
struct OpEvent {
  std::string name;
  std::string device;
  int64_t start_ns = 0;     // steady clock (CLOCK_MONOTONIC, as Python's time.monotonic_ns)
  int64_t duration_ns = 0;
  int64_t thread = 0;       // a small number per recording thread, from 0
  int64_t sequence = 0;     // order of completion among all events of the run
  // With record_shapes: each tensor input's shape and dtype name (undefined inputs: empty
  // shape and dtype ""), and each output's shape (FLOP formulas need both).
  std::vector<std::vector<int64_t>> input_shapes;
  std::vector<std::string> input_dtypes;
  std::vector<std::vector<int64_t>> output_shapes;
};

struct Options {
  bool trace = false;          // keep every call as an OpEvent
  bool record_shapes = false;  // with trace: the inputs' shapes and dtypes
  // At most this many events are kept (the rest are still aggregated): 0 means no limit.
  int64_t max_events = 0;
};

// Starts recording (clearing earlier records); an error if already started.
void start(const Options& options = {});
// Stops recording; the records stay readable until the next start().
void stop();
bool is_enabled();
// The records, slowest total first.
std::vector<OpStats> stats();
// The events of the last run (Options::trace), in completion order.
std::vector<OpEvent> events();
// Events that did not fit under Options::max_events.
int64_t dropped_events();
// A text table of the records (at most row_limit rows; 0: all) with a total line.
std::string table(int row_limit = 0);

}  // namespace kiln::profiler
