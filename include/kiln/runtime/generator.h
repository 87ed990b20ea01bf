#pragma once
// Generator: counter-based random numbers (Philox 4x32-10). The seed and the offset are the
// whole state, so the same seed gives the same numbers on every backend: a kernel producing
// n values reserves a range of counters with reserve() and computes value i from
// philox(seed, offset + i) on whatever device it runs.
#include <array>
#include <cstdint>
#include <memory>
#include <mutex>

#include "kiln/runtime/device.h"

namespace kiln {

// One Philox 4x32-10 block: 4 random 32-bit words for (key, counter).
std::array<uint32_t, 4> philox4x32(uint64_t key, uint64_t counter_lo, uint64_t counter_hi = 0);

// Uniform floats in [0, 1) from 32 random bits (24 used) / from 64 bits (53 used).
inline float uint32_to_unit_float(uint32_t x) { return float(x >> 8) * (1.0f / 16777216.0f); }
inline double uint64_to_unit_double(uint64_t x) {
  return double(x >> 11) * (1.0 / 9007199254740992.0);
}

class Generator {
 public:
  explicit Generator(uint64_t seed = 67280421310721ull);

  void manual_seed(uint64_t seed);  // also resets the offset to 0
  uint64_t seed() const;
  uint64_t offset() const;
  void set_offset(uint64_t offset);
  // Reserves n Philox blocks; returns the first counter of the reserved range.
  uint64_t reserve(uint64_t n_blocks);

  struct State {
    uint64_t seed, offset;
  };
  State state() const;
  void set_state(State s);

 private:
  mutable std::mutex mutex_;
  uint64_t seed_;
  uint64_t offset_ = 0;
};

// The default generator of a device (one per device index), as torch.default_generator.
Generator& default_generator(Device device = Device(DeviceType::CPU, 0));
// Seeds the default generators of every device of every backend (kiln::manual_seed).
void manual_seed(uint64_t seed);

}  // namespace kiln
