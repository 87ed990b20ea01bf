#pragma once
// Loops over the bit patterns of floats, chosen per ISA level: nan_to_num of float32 /
// bfloat16 / float16 and the sign bit operations (abs, neg) of 16-bit floats. Integer compares
// and selects only, so results are exact and need no float arithmetic; each level's unit is
// the same source (bit_loops_body.inc) compiled with its vector width. In the baseline unit
// (SSE2) float32 nan_to_num ran at half PyTorch's speed.
#include <cstdint>

namespace kiln::cpu {

struct BitLoops {
  // out[i] = in[i], except NaN -> nan_b, +inf -> pos_b, -inf -> neg_b; `inf` is the type's
  // +infinity bits (0x7f800000 float32, 0x7f80 bfloat16, 0x7c00 float16). in == out or the
  // arrays are disjoint.
  void (*nan_to_num_b32)(const int32_t* in, int32_t* out, int64_t n, int32_t inf, int32_t nan_b,
                         int32_t pos_b, int32_t neg_b) = nullptr;
  void (*nan_to_num_b16)(const int16_t* in, int16_t* out, int64_t n, int16_t inf, int16_t nan_b,
                         int16_t pos_b, int16_t neg_b) = nullptr;
  // out[i] = in[i] with bit 15 cleared (abs) / flipped (neg); in == out or disjoint.
  void (*abs_b16)(const uint16_t* in, uint16_t* out, int64_t n) = nullptr;
  void (*neg_b16)(const uint16_t* in, uint16_t* out, int64_t n) = nullptr;
};

const BitLoops& bit_loops_baseline();
const BitLoops& bit_loops_avx2();
const BitLoops& bit_loops_avx512();

// The table for the current ISA level (every entry set at every level).
const BitLoops& bit_loops();

}  // namespace kiln::cpu
