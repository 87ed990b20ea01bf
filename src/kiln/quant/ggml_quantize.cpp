// Reference quantisation to ggml's Q8_0 and Q4_0 blocks (see ggml_types.h), for users who
// quantise float weights themselves (kiln.quant.quantize) and for the tests.
#include <cmath>
#include <cstring>

#include "kiln/core/error.h"
#include "kiln/core/half.h"
#include "kiln/quant/ggml_types.h"

namespace kiln::quant {

namespace {

void put_f16(uint8_t* p, float v) {
  const uint16_t h = Half::from_float(v);
  std::memcpy(p, &h, 2);
}

void q8_0_block(const float* x, uint8_t* b) {
  float amax = 0;
  for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[j]));
  const float d = amax / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  put_f16(b, d);
  for (int j = 0; j < 32; ++j) b[2 + j] = uint8_t(int8_t(std::round(x[j] * id)));
}

void q4_0_block(const float* x, uint8_t* b) {
  float amax = 0, max = 0;  // the value of largest magnitude, with its sign
  for (int j = 0; j < 32; ++j) {
    if (std::fabs(x[j]) > amax) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  const float d = max / -8.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  put_f16(b, d);
  for (int j = 0; j < 16; ++j) {
    const int lo = std::min(15, int(x[j] * id + 8.5f));
    const int hi = std::min(15, int(x[j + 16] * id + 8.5f));
    b[2 + j] = uint8_t(lo | (hi << 4));
  }
}

}  // namespace

void quantize_ggml_row(GGMLType type, const float* src, uint8_t* dst, int64_t n) {
  KILN_CHECK(type == GGMLType::Q8_0 || type == GGMLType::Q4_0, NotImplementedError,
             "quantize: kiln quantises to Q8_0 and Q4_0, not ", ggml_type_info(type).name);
  KILN_CHECK(n % 32 == 0, ValueError, "quantize ", ggml_type_info(type).name, ": rows must hold a "
             "multiple of 32 values, got ", n);
  const int64_t bytes = ggml_type_info(type).block_bytes;
  for (int64_t i = 0; i < n / 32; ++i) {
    if (type == GGMLType::Q8_0) q8_0_block(src + 32 * i, dst + bytes * i);
    else q4_0_block(src + 32 * i, dst + bytes * i);
  }
}

}  // namespace kiln::quant
