#pragma once
// The block-quantised tensor types of ggml / GGUF files (llama.cpp's formats): their numbers
// as stored in a GGUF tensor info, how many values one block holds and how many bytes it
// takes, and conversion of whole rows back to float32. A row of n values (n a multiple of
// the block size) is n / block_elems blocks stored back to back.
#include <cstdint>
#include <string>

namespace kiln::quant {

enum class GGMLType : uint32_t {
  F32 = 0, F16 = 1, Q4_0 = 2, Q4_1 = 3, Q5_0 = 6, Q5_1 = 7, Q8_0 = 8, Q8_1 = 9,
  Q2_K = 10, Q3_K = 11, Q4_K = 12, Q5_K = 13, Q6_K = 14, Q8_K = 15,
  I8 = 24, I16 = 25, I32 = 26, I64 = 27, F64 = 28, BF16 = 30,
};

struct GGMLTypeInfo {
  GGMLType type;
  const char* name;     // as ggml names it: "Q8_0", "F16", ...
  int64_t block_elems;  // values per block (1 for plain types)
  int64_t block_bytes;  // bytes per block
  bool quantized;       // block-quantised (dequantize_ggml_row applies)
};

// The table entry of a type number read from a file, or nullptr if kiln does not know it
// (the i-quants, removed types, garbage).
const GGMLTypeInfo* ggml_type_info(uint32_t type);
const GGMLTypeInfo& ggml_type_info(GGMLType type);
// "Q8_0", or "type 17" for numbers kiln does not know.
std::string ggml_type_name(uint32_t type);
// Bytes of a row of n values; kiln::ValueError unless n is a multiple of the block size.
int64_t ggml_row_bytes(GGMLType type, int64_t n);

// Converts one row of n values (n a multiple of the block size) of a quantised type to
// float32, exactly as ggml's reference dequantisation (float16 scales widened, products in
// float). Plain types (F32, F16, BF16) are converted too.
void dequantize_ggml_row(GGMLType type, const uint8_t* src, float* dst, int64_t n);

// Quantises one row of n float32 values (n a multiple of 32) to Q8_0 or Q4_0 blocks as
// ggml's reference quantisers do (Q8_0: d = max|x| / 127, round half away from zero; Q4_0:
// d = (the value of largest magnitude) / -8, values min(15, trunc(x / d + 8.5))).
// NotImplementedError for other types.
void quantize_ggml_row(GGMLType type, const float* src, uint8_t* dst, int64_t n);

}  // namespace kiln::quant
