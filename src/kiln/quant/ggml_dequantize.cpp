// Reference dequantisation of ggml's block formats, one block at a time, following the
// layouts of ggml's block structs (little-endian; float16 scales). Used to load weights of
// types that have no kiln kernel and as the reference the kernels are tested against.
#include <cstring>

#include "kiln/core/error.h"
#include "kiln/core/half.h"
#include "kiln/quant/ggml_types.h"

namespace kiln::quant {

namespace {

float f16_at(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return Half::to_float(h);
}

// Q4_0: d, then 16 bytes: value j is the low nibble of byte j, value j + 16 its high nibble,
// both offset by 8. Q4_1 adds a minimum m instead of the offset.
void q4_0(const uint8_t* b, float* y) {
  const float d = f16_at(b);
  const uint8_t* qs = b + 2;
  for (int j = 0; j < 16; ++j) {
    y[j] = float((qs[j] & 0xF) - 8) * d;
    y[j + 16] = float((qs[j] >> 4) - 8) * d;
  }
}

void q4_1(const uint8_t* b, float* y) {
  const float d = f16_at(b), m = f16_at(b + 2);
  const uint8_t* qs = b + 4;
  for (int j = 0; j < 16; ++j) {
    y[j] = float(qs[j] & 0xF) * d + m;
    y[j + 16] = float(qs[j] >> 4) * d + m;
  }
}

// Q5_0 / Q5_1: as Q4 with a fifth bit per value in a 32-bit mask (bit j for value j).
void q5(const uint8_t* b, float* y, bool with_min) {
  const float d = f16_at(b), m = with_min ? f16_at(b + 2) : 0.0f;
  const uint8_t* p = b + (with_min ? 4 : 2);
  uint32_t qh;
  std::memcpy(&qh, p, 4);
  const uint8_t* qs = p + 4;
  for (int j = 0; j < 16; ++j) {
    const int hi0 = int((qh >> j) & 1u) << 4, hi1 = int((qh >> (j + 16)) & 1u) << 4;
    const int v0 = (qs[j] & 0xF) | hi0, v1 = (qs[j] >> 4) | hi1;
    if (with_min) {
      y[j] = float(v0) * d + m;
      y[j + 16] = float(v1) * d + m;
    } else {
      y[j] = float(v0 - 16) * d;
      y[j + 16] = float(v1 - 16) * d;
    }
  }
}

// Q8_0: d, 32 int8. Q8_1 has a second float16 (d times the sum) before the values.
void q8(const uint8_t* b, float* y, int values_at) {
  const float d = f16_at(b);
  const int8_t* qs = reinterpret_cast<const int8_t*>(b + values_at);
  for (int j = 0; j < 32; ++j) y[j] = float(qs[j]) * d;
}

// The 6-bit scales and minimums of Q4_K / Q5_K: 8 pairs packed into 12 bytes.
void k4_scale_min(int j, const uint8_t* q, int& sc, int& mn) {
  if (j < 4) {
    sc = q[j] & 63;
    mn = q[j + 4] & 63;
  } else {
    sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
    mn = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

// Q2_K: 16 4-bit scale/min pairs, 2-bit values, d and dmin at the end.
void q2_k(const uint8_t* b, float* y) {
  const uint8_t* scales = b;
  const uint8_t* q = b + 16;
  const float d = f16_at(b + 80), dmin = f16_at(b + 82);
  int is = 0;
  for (int n = 0; n < 256; n += 128) {
    for (int shift = 0; shift < 8; shift += 2) {
      for (int half = 0; half < 2; ++half) {
        const uint8_t sc = scales[is++];
        const float dl = d * float(sc & 0xF), ml = dmin * float(sc >> 4);
        for (int l = 0; l < 16; ++l) *y++ = dl * float((q[l + 16 * half] >> shift) & 3) - ml;
      }
    }
    q += 32;
  }
}

// Q3_K: a high-bit mask, 2-bit low parts, 16 6-bit scales packed into 12 bytes, d.
void q3_k(const uint8_t* b, float* y) {
  const uint8_t* hm = b;
  const uint8_t* q = b + 32;
  const uint8_t* packed = b + 96;
  const float d = f16_at(b + 108);
  // Unpack the 16 scales: low 4 bits from bytes 0-7 (two per byte), high 2 bits from 8-11.
  int8_t scales[16];
  for (int i = 0; i < 16; ++i) {
    const int low = i < 8 ? (packed[i] & 0xF) : (packed[i - 8] >> 4);
    const int high = (packed[8 + (i % 4)] >> (2 * (i / 4))) & 3;
    scales[i] = int8_t((low | (high << 4)) - 32);
  }
  int is = 0;
  uint8_t m = 1;
  for (int n = 0; n < 256; n += 128) {
    for (int shift = 0; shift < 8; shift += 2) {
      for (int half = 0; half < 2; ++half) {
        const float dl = d * float(scales[is++]);
        for (int l = 0; l < 16; ++l) {
          const int i = l + 16 * half;
          const int v = int((q[i] >> shift) & 3) - ((hm[i] & m) ? 0 : 4);
          *y++ = dl * float(v);
        }
      }
      m = uint8_t(m << 1);
    }
    q += 32;
  }
}

// Q4_K / Q5_K: d, dmin, 12 bytes of scales, (Q5_K: 32 bytes of fifth bits), 128 bytes of
// nibbles; each 64 values use two scale/min pairs.
void q45_k(const uint8_t* b, float* y, bool five_bits) {
  const float d = f16_at(b), dmin = f16_at(b + 2);
  const uint8_t* scales = b + 4;
  const uint8_t* qh = b + 16;
  const uint8_t* q = five_bits ? b + 48 : b + 16;
  uint8_t u1 = 1, u2 = 2;
  for (int j = 0, is = 0; j < 256; j += 64, is += 2) {
    int sc, mn;
    k4_scale_min(is, scales, sc, mn);
    const float d1 = d * float(sc), m1 = dmin * float(mn);
    k4_scale_min(is + 1, scales, sc, mn);
    const float d2 = d * float(sc), m2 = dmin * float(mn);
    for (int l = 0; l < 32; ++l) {
      const int hi = five_bits && (qh[l] & u1) ? 16 : 0;
      *y++ = d1 * float((q[l] & 0xF) + hi) - m1;
    }
    for (int l = 0; l < 32; ++l) {
      const int hi = five_bits && (qh[l] & u2) ? 16 : 0;
      *y++ = d2 * float((q[l] >> 4) + hi) - m2;
    }
    q += 32;
    u1 = uint8_t(u1 << 2);
    u2 = uint8_t(u2 << 2);
  }
}

// Q6_K: low 4 bits (128 bytes), high 2 bits (64 bytes), 16 int8 scales, d.
void q6_k(const uint8_t* b, float* y) {
  const uint8_t* ql = b;
  const uint8_t* qh = b + 128;
  const int8_t* sc = reinterpret_cast<const int8_t*>(b + 192);
  const float d = f16_at(b + 208);
  for (int n = 0; n < 256; n += 128) {
    for (int l = 0; l < 32; ++l) {
      const int is = l / 16;
      const int q1 = int((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
      const int q2 = int((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
      const int q3 = int((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
      const int q4 = int((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
      y[l] = d * float(sc[is]) * float(q1);
      y[l + 32] = d * float(sc[is + 2]) * float(q2);
      y[l + 64] = d * float(sc[is + 4]) * float(q3);
      y[l + 96] = d * float(sc[is + 6]) * float(q4);
    }
    y += 128;
    ql += 64;
    qh += 32;
    sc += 8;
  }
}

// Q8_K: a float32 scale, 256 int8, then 16 int16 block sums (not needed here).
void q8_k(const uint8_t* b, float* y) {
  float d;
  std::memcpy(&d, b, 4);
  const int8_t* qs = reinterpret_cast<const int8_t*>(b + 4);
  for (int j = 0; j < 256; ++j) y[j] = d * float(qs[j]);
}

}  // namespace

void dequantize_ggml_row(GGMLType type, const uint8_t* src, float* dst, int64_t n) {
  const GGMLTypeInfo& t = ggml_type_info(type);
  KILN_CHECK(n % t.block_elems == 0, ValueError, "dequantize ", t.name, ": a row of ", n,
             " values is not a whole number of blocks of ", t.block_elems);
  const int64_t blocks = n / t.block_elems;
  for (int64_t i = 0; i < blocks; ++i) {
    const uint8_t* b = src + i * t.block_bytes;
    float* y = dst + i * t.block_elems;
    switch (type) {
      case GGMLType::F32: std::memcpy(y, b, 4); break;
      case GGMLType::F16: *y = f16_at(b); break;
      case GGMLType::BF16: {
        uint16_t h;
        std::memcpy(&h, b, 2);
        *y = float(BFloat16::from_bits(h));
        break;
      }
      case GGMLType::Q4_0: q4_0(b, y); break;
      case GGMLType::Q4_1: q4_1(b, y); break;
      case GGMLType::Q5_0: q5(b, y, false); break;
      case GGMLType::Q5_1: q5(b, y, true); break;
      case GGMLType::Q8_0: q8(b, y, 2); break;
      case GGMLType::Q8_1: q8(b, y, 4); break;
      case GGMLType::Q2_K: q2_k(b, y); break;
      case GGMLType::Q3_K: q3_k(b, y); break;
      case GGMLType::Q4_K: q45_k(b, y, false); break;
      case GGMLType::Q5_K: q45_k(b, y, true); break;
      case GGMLType::Q6_K: q6_k(b, y); break;
      case GGMLType::Q8_K: q8_k(b, y); break;
      default:
        KILN_CHECK(false, TypeError, "dequantize: ggml type ", t.name,
                   " holds integers, not quantised floats");
    }
  }
}

}  // namespace kiln::quant
