#include "kiln/backends/cpu/cpu_info.h"
#include "kiln/runtime/generator.h"
#include "philox_blocks.h"

namespace kiln::cpu {
namespace {

void philox_blocks_scalar(uint64_t key, uint64_t counter, int64_t blocks, uint32_t* out) {
  for (int64_t j = 0; j < blocks; ++j) {
    const std::array<uint32_t, 4> w = philox4x32(key, counter + uint64_t(j));
    for (int k = 0; k < 4; ++k) out[4 * j + k] = w[size_t(k)];
  }
}

}  // namespace

PhiloxBlocksFn philox_blocks() {
  static const PhiloxBlocksFn fn = isa_level() >= IsaLevel::Avx512 ? philox_blocks_avx512()
                                   : isa_level() >= IsaLevel::Avx2  ? philox_blocks_avx2()
                                                                    : philox_blocks_scalar;
  return fn;
}

}  // namespace kiln::cpu
