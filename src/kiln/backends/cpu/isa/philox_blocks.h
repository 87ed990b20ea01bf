#pragma once
// Philox 4x32-10 blocks in bulk: out[4 j + w] = word w of philox4x32(key, counter + j) for
// j < blocks (the counter wraps modulo 2^64; its high 64 bits are 0), the values of
// kiln::philox4x32 (kiln/runtime/generator.h) bit for bit. The random kernels draw through a
// buffer of such blocks; the AVX-512 and AVX2 variants compute eight blocks per step in 64-bit
// lanes.
#include <cstdint>

namespace kiln::cpu {

// blocks: a multiple of kPhiloxBlocksStep.
using PhiloxBlocksFn = void (*)(uint64_t key, uint64_t counter, int64_t blocks, uint32_t* out);
inline constexpr int64_t kPhiloxBlocksStep = 8;

// The ISA's variant (AVX-512, AVX2), or the scalar loop over philox4x32 below them.
PhiloxBlocksFn philox_blocks();

PhiloxBlocksFn philox_blocks_avx512();
PhiloxBlocksFn philox_blocks_avx2();

}  // namespace kiln::cpu
