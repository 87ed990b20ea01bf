// Generator state (seed, offset) and the per-device default generators.
#include "kiln/runtime/generator.h"

#include <array>
#include <atomic>

#include "kiln/runtime/internal.h"

namespace kiln {

Generator::Generator(uint64_t seed) : seed_(seed) {}

void Generator::manual_seed(uint64_t seed) {
  std::lock_guard lock(mutex_);
  seed_ = seed;
  offset_ = 0;
}

uint64_t Generator::seed() const {
  std::lock_guard lock(mutex_);
  return seed_;
}

uint64_t Generator::offset() const {
  std::lock_guard lock(mutex_);
  return offset_;
}

void Generator::set_offset(uint64_t offset) {
  std::lock_guard lock(mutex_);
  offset_ = offset;
}

uint64_t Generator::reserve(uint64_t n_blocks) {
  std::lock_guard lock(mutex_);
  uint64_t first = offset_;
  offset_ += n_blocks;  // wraps after 2^64 blocks, like the counter space itself
  return first;
}

Generator::State Generator::state() const {
  std::lock_guard lock(mutex_);
  return {seed_, offset_};
}

void Generator::set_state(State s) {
  std::lock_guard lock(mutex_);
  seed_ = s.seed;
  offset_ = s.offset;
}

namespace {
using Table = std::array<std::array<std::atomic<Generator*>, detail::kMaxDevicesPerType>,
                         kNumDeviceTypes>;
Table g_default_generators{};
std::mutex g_create_mutex;
// The last manual_seed: generators created after it start from it (see manual_seed).
bool g_has_global_seed = false;
uint64_t g_global_seed = 0;
}  // namespace

Generator& default_generator(Device device) {
  Device d = detail::check_device(device).device;
  auto& slot = g_default_generators[size_t(d.type)][size_t(d.index)];
  if (Generator* g = slot.load(std::memory_order_acquire)) return *g;
  std::lock_guard lock(g_create_mutex);
  if (Generator* g = slot.load(std::memory_order_acquire)) return *g;
  // leaked on purpose: references stay valid until exit
  auto* g = g_has_global_seed ? new Generator(g_global_seed) : new Generator();
  slot.store(g, std::memory_order_release);
  return *g;
}

// Seeds every default generator: those that exist now, and (through the recorded seed) those
// created later. Devices are not enumerated: counting xpu devices starts the OpenCL runtime,
// which cost every kiln.manual_seed() 25 ms (and every DataLoader worker that seeded).
void manual_seed(uint64_t seed) {
  std::lock_guard lock(g_create_mutex);
  g_has_global_seed = true;
  g_global_seed = seed;
  for (auto& per_type : g_default_generators)
    for (auto& slot : per_type)
      if (Generator* g = slot.load(std::memory_order_acquire)) g->manual_seed(seed);
}

}  // namespace kiln
