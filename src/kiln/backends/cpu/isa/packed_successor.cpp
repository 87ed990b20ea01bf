// The per-thread chain of packed weights (see packed_successor.h). Plain code: compiled once,
// not per ISA level.
#include "packed_successor.h"

#include <unordered_map>

namespace kiln::cpu {

PackedRun packed_successor(const void* weight, PackedRun first_block) {
  thread_local std::unordered_map<const void*, PackedRun> successor_of;
  thread_local const void* previous = nullptr;
  if (weight == previous) return {};  // one weight in a loop: nothing to learn
  if (previous) {
    if (successor_of.size() >= 4096) successor_of.clear();  // bounded: weights come and go
    successor_of[previous] = first_block;
  }
  previous = weight;
  const auto it = successor_of.find(weight);
  return it == successor_of.end() ? PackedRun{} : it->second;
}

}  // namespace kiln::cpu
