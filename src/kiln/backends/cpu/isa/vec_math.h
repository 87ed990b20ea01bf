#pragma once
// Vectorised float32 math over contiguous arrays, compiled once per ISA level (AVX2,
// AVX-512) with SLEEF's 1-ULP functions for the transcendentals, chosen once at start. The
// unary kernels use it for contiguous float32 tensors; everything else takes the scalar path.
// Formulas match the scalar kernels (scalar_math / unary_kernels), so special values agree:
// sigmoid(x) = 1 / (1 + exp(-x)), silu(x) = x / (1 + exp(-x)), gelu with erf or tanh.
#include <cstdint>

namespace kiln::cpu {

using VecUnaryF32 = void (*)(const float* in, float* out, int64_t n);

// softmax (log_softmax when log) of one contiguous row of n values; the row's maximum is
// subtracted first, the sum of exponentials accumulates in float32 lanes (as PyTorch).
using VecSoftmaxRowF32 = void (*)(const float* in, float* out, int64_t n, bool log);
// `rows` contiguous float32 rows of n values each written with non-temporal stores
// (scratch: 2 n floats for the exponentials; in and out must not overlap); the caller fences
// (detail::stream_fence) after its last call.
using VecSoftmaxRowsStreamF32 = void (*)(const float* in, float* out, float* scratch,
                                         int64_t rows, int64_t n, bool log);
// The same for a bfloat16 row, converted in registers (scratch: n floats for the exponentials
// before the sum is known): bit for bit the float32 row on the widened values, rounded once.
using VecSoftmaxRowBf16 = void (*)(const uint16_t* in, uint16_t* out, float* scratch,
                                   int64_t n, bool log);

// softmax (log_softmax when log) of `rows` contiguous rows of n values each, n at most
// kSoftmaxShortRowMax: a vector's width of rows at a time, transposed so that each lane
// is a row. softmax_row spent about 80 cycles on a row of 8 (its horizontal steps, the
// scalar log); one thread, [32768, n] float32, AVX2, row by row -> transposed: log_softmax
// n = 4 1.55 -> 0.34 ms, 8 0.80 -> 0.28, 16 0.90 -> 0.43, 31 2.2 -> 0.9, 32 1.2 -> 0.73;
// beyond 32 the two cross (n = 40 even, 64 slower transposed).
constexpr int64_t kSoftmaxShortRowMax = 32;
using VecSoftmaxShortRowsF32 = void (*)(const float* in, float* out, int64_t rows, int64_t n,
                                        bool log);
using VecSoftmaxShortRowsBf16 = void (*)(const uint16_t* in, uint16_t* out, int64_t rows,
                                         int64_t n, bool log);

// softmax (log_softmax when log) down each column of a dense tile [lines, width] (width at
// most kSoftmaxColumnsMax), in place: the softmax along a dim that is not the last.
constexpr int64_t kSoftmaxColumnsMax = 256;
using VecSoftmaxColumnsF32 = void (*)(float* tile, int64_t lines, int64_t width, bool log);

// sum_k a[k] * b[k] over contiguous arrays (several float32 accumulators).
using VecDotF32 = float (*)(const float* a, const float* b, int64_t n);

// out[r] = sum_k a[k] * b[r * ldb + k] for r < 4: four dot products sharing a, so a
// matrix-vector product streams four weight rows at once (more memory parallelism than one).
using VecDot4F32 = void (*)(const float* a, const float* b, int64_t ldb, int64_t n, float* out);

// out[r * out_rs + c] = sum_k a[r * a_rs + k] * w[c * w_rs + k] for r < rows (1 to
// kDotTileRows) and c < cols (1 to kDotTileCols), float32 sums: a tile of dot products that
// loads each weight vector once for all its activation rows, so a product of a few rows with
// a row-major weight (x @ W.T while decoding several sequences) streams the weight once.
// Up to 6 rows a tile takes 4 weight rows (24 accumulators), 7 or 8 rows 3, so that a product
// of 7-8 rows reads each weight row once, in one pass (3-11% faster than a pass of 6 rows and
// one of the rest; decision 0142).
inline constexpr int kDotTileRows = 8, kDotTileCols = 4;
inline constexpr int dot_tile_cols(int rows) { return rows > 6 ? 3 : 4; }
using VecDotTileF32 = void (*)(const float* a, int64_t a_rs, int rows, const float* w,
                               int64_t w_rs, int cols, int64_t n, float* out, int64_t out_rs);
using VecDotTileBf16 = void (*)(const uint16_t* a, int64_t a_rs, int rows, const uint16_t* w,
                                int64_t w_rs, int cols, int64_t n, float* out, int64_t out_rs);

// bfloat16 <-> float32 over contiguous arrays (exact widening; narrowing rounds to nearest
// even, NaN stays NaN), so bfloat16 tensors can use the float32 vector functions chunk by
// chunk.
using VecWidenBf16 = void (*)(const uint16_t* in, float* out, int64_t n);
using VecNarrowBf16 = void (*)(const float* in, uint16_t* out, int64_t n);
// float16 <-> float32 with the F16C instructions, bit for bit as kiln::Half (round to nearest
// even; subnormals, infinities and NaN payloads kept); null where the CPU lacks F16C.
using VecWidenF16 = void (*)(const uint16_t* in, float* out, int64_t n);
using VecNarrowF16 = void (*)(const float* in, uint16_t* out, int64_t n);
// float16 in registers (F16C) for float16_blocks.h, each operand stepping by one value (step
// 1) or staying on one (step 0; not all inputs): out[i] = a op b for op +, -, *, /, maximum,
// minimum (NaN-propagating, as the float32 forms), and out[i] = add + x * mul (the product
// rounded first). The widening and rounding of widen_f16 / narrow_f16 around the float32
// functions, so bit for bit the blocks' result, without their passes over L1 buffers; out
// may be an input (in place). Null without F16C.
using VecBinaryF16 = void (*)(const uint16_t* a, int64_t a_step, const uint16_t* b,
                              int64_t b_step, uint16_t* out, int64_t n);
using VecMulAddF16 = void (*)(const uint16_t* x, int64_t x_step, const uint16_t* mul,
                              int64_t mul_step, const uint16_t* add, int64_t add_step,
                              uint16_t* out, int64_t n);
// sum_k a[k] * w[k] for a float32 row and float16 weight rows widened in registers (F16C):
// one row, and four rows of stride ldw at once (out[0..3]; more loads in flight); null
// without F16C.
using VecDotF32F16 = float (*)(const float* a, const uint16_t* w, int64_t n);
using VecDot4F32F16 = void (*)(const float* a, const uint16_t* w, int64_t ldw, int64_t n,
                               float* out);

// out[i] = bfloat16(add[i * add_step] + x[i] * mul[i * mul_step]) for bfloat16 x and float32
// mul / add (steps 0: one value, or 1: an array), the product rounded to float32 before the
// sum (no fused multiply-add), so it is bit-identical to addcmul's float32 functor on widened
// blocks. Conversions stay in registers: eval-mode batch norm (shift + x * scale per channel)
// costs one pass instead of widen / compute / narrow passes over buffers.
using VecMulAddBf16 = void (*)(const uint16_t* x, const float* mul, int64_t mul_step,
                               const float* add, int64_t add_step, uint16_t* out, int64_t n);

// out[i] = bfloat16(float(a[i]) op float(b[i])) for op +, -, *, /, maximum, minimum (NaN
// propagating, as scalar_math.h's nan_max / nan_min), converted in registers
// (residual adds, products of activations): bit-identical to the float32 op on widened blocks.
using VecBinaryBf16 = void (*)(const uint16_t* a, const uint16_t* b, uint16_t* out, int64_t n);

// out[i] = a[i * a_step] op b[i * b_step] for float32, op +, -, *, /, maximum, minimum (as
// above) and steps 1 (an array)
// or 0 (one value), not both 0; out may be a or b itself (in-place ops). The generic
// elementwise loop is built for baseline x86-64 and ran add / mul of 1M floats at 90 GB/s
// against PyTorch's 150-165 (two threads, in cache); single IEEE operations, so the results
// are bit-identical to it.
using VecBinaryF32 = void (*)(const float* a, int64_t a_step, const float* b, int64_t b_step,
                              float* out, int64_t n);

// out[i] = (in[i] - mean) * rstd * w[i] + b[i] (w and / or b may be null: factor 1, term 0),
// the last step a fused multiply-add: the write pass of layer_norm / rms_norm (float32 rows,
// and bfloat16 rows widened to float32; in == out allowed unless stream). stream: the row is
// written with non-temporal stores (outputs far beyond the cache, see
// kiln/tensor/streaming_store.h), and the caller calls detail::stream_fence() after its last
// row.
using VecNormAffineF32 = void (*)(const float* in, float* out, int64_t n, float mean,
                                  float rstd, const float* w, const float* b, bool stream);
// The same write pass into a bfloat16 row (no streaming), rounded in registers: bit for bit
// the float32 pass narrowed afterwards.
using VecNormAffineBf16 = void (*)(const float* in, uint16_t* out, int64_t n, float mean,
                                   float rstd, const float* w, const float* b);

// The same for float32 x and out (eval-mode batch norm in float32); out may be x.
using VecMulAddF32 = void (*)(const float* x, const float* mul, int64_t mul_step,
                              const float* add, int64_t add_step, float* out, int64_t n);

// lerp with one weight t for all, PyTorch's rounding: one fused multiply-add,
// fma(t, b[i] - a[i], a[i]) for |t| < 0.5, else fma(t - 1, b[i] - a[i], b[i]) (exact at both
// ends). lerp_rounded_twice_f32 (same signature): a[i] + t * (b[i] - a[i]) for |t| < 0.5, else
// b[i] - (b[i] - a[i]) * (1 - t), each product rounded before its sum: index_lerp's blend
// (interpolate's linear modes), bit for bit its scalar form.
using VecLerpF32 = void (*)(const float* a, const float* b, float t, float* out, int64_t n);
// index_lerp's blend along a row of n1 positions of `inner` values each (channels-last rows):
// out[q * inner + k] = the blend of t[j0[q] * inner + k] and t[j1[q] * inner + k] with weight
// v[q], each rounded as lerp_rounded_twice_f32.
using VecLerpPositionsF32 = void (*)(const float* t, const int64_t* j0, const int64_t* j1,
                                     const float* v, int64_t n1, int64_t inner, float* out);
// Both steps at once, for rows whose positions are each used once or not at all (resizing
// down): out[q * inner + k] = the positions' blend (weight v[q]) of t = the blend of rows a and
// b with weight w, taken at positions j0[q] and j1[q] only; bit for bit
// lerp_rounded_twice_f32 on the rows, then lerp_positions_f32, without writing t.
using VecLerpRowsPositionsF32 = void (*)(const float* a, const float* b, float w,
                                         const int64_t* j0, const int64_t* j1, const float* v,
                                         int64_t n1, int64_t inner, float* out);
// The same over bfloat16 arrays, converted in registers: bit for bit the float32 loop on the
// widened values, rounded once.
using VecLerpBf16 = void (*)(const uint16_t* a, const uint16_t* b, float t, uint16_t* out,
                             int64_t n);

// A unary function with up to two float parameters: leaky_relu (p0 = the negative slope),
// softplus (p0 = beta, p1 = threshold) and clamp (p0 = min, p1 = max: x < min ? min : x, then
// x > max ? max : x, as the scalar kernel, so NaN stays NaN and min > max gives max).
using VecUnaryParamF32 = void (*)(const float* in, float* out, int64_t n, float p0, float p1);

// log(sum_k exp(in[k])) of one contiguous row (n >= 1): the row's maximum m is taken out
// first, exp(in - m) summed in float32 lanes; NaN anywhere gives NaN, a +inf maximum +inf and
// an all -inf row -inf (PyTorch's results).
using VecLogSumExpRowF32 = float (*)(const float* in, int64_t n);

// Box-Muller on n pairs of uniforms: r = sqrt(-2 ln u1[k]), t = 2 pi u2[k] in float32,
// z0[k] = r cos t, z1[k] = r sin t (SLEEF's log, sin and cos).
using VecBoxMullerF32 = void (*)(const float* u1, const float* u2, float* z0, float* z1,
                                 int64_t n);

// float32 -> int64 / int32 over contiguous arrays, truncating toward zero, NaN and values out
// of the type's range giving its minimum (decision 0005). AVX-512: vcvttps2qq / vcvttps2dq
// return exactly that; AVX2: vcvttps2dq, and int32 sign-extended to int64 where in range;
// null at the baseline level, where the element loop converts.
using VecToI64F32 = void (*)(const float* in, int64_t* out, int64_t n);
// Max pooling over channels-last taps: for channels [0, done) (whole vectors; returned) of one
// output position, out[c] = the largest of image[flats[t] * C + c] over the taps t (NaN wins,
// later taps win ties only when NaN: `v > best || v != v`, the planar kernel's rule) and at[c]
// = its tap's flat position as a float (exact below 2^24). bfloat16 values stay bfloat16.
using VecMaxTapsF32 = int64_t (*)(const float* image, const int32_t* flats, int64_t taps,
                                  int64_t C, float* out, float* at);
using VecMaxTapsBf16 = int64_t (*)(const uint16_t* image, const int32_t* flats, int64_t taps,
                                   int64_t C, uint16_t* out, float* at);
using VecToI32F32 = void (*)(const float* in, int32_t* out, int64_t n);

// The unary functions of the tables below, by name (one list, so the float32 and bfloat16
// tables cannot drift apart): exp, log, ..., square (x * x) and cube ((x * x) * x: pow's
// exponents 2 and 3); the parameterised ones take VecUnaryParam* (see above).
#define KILN_VEC_UNARY_NAMES(X)                                                              \
  X(exp) X(log) X(tanh) X(sigmoid) X(silu) X(gelu_erf) X(gelu_tanh) X(relu) X(erf) X(abs)    \
  X(neg) X(sqrt) X(rsqrt) X(reciprocal) X(floor) X(ceil) X(trunc) X(round) X(sign) X(sin)    \
  X(cos) X(tan) X(exp2) X(expm1) X(log2) X(log1p) X(square) X(cube)
#define KILN_VEC_UNARY_PARAM_NAMES(X) X(leaky_relu) X(softplus) X(clamp)

// The same functions over bfloat16 arrays: each vector of values is widened in registers,
// the float32 function's vector code runs on it, and the result is rounded back (nearest
// even, NaN kept a quiet NaN) in registers before the store. Bit-identical to widening a
// block into a float32 buffer, running the float32 function and narrowing the buffer, without
// the two extra passes over the buffer (decision 0039).
using VecUnaryBf16 = void (*)(const uint16_t* in, uint16_t* out, int64_t n);
using VecUnaryParamBf16 = void (*)(const uint16_t* in, uint16_t* out, int64_t n, float p0,
                                   float p1);
struct VecUnaryBf16Table {
#define KILN_VEC_FIELD(name) VecUnaryBf16 name = nullptr;
  KILN_VEC_UNARY_NAMES(KILN_VEC_FIELD)
#undef KILN_VEC_FIELD
#define KILN_VEC_FIELD(name) VecUnaryParamBf16 name = nullptr;
  KILN_VEC_UNARY_PARAM_NAMES(KILN_VEC_FIELD)
#undef KILN_VEC_FIELD
};

struct VecMathF32 {
#define KILN_VEC_FIELD(name) VecUnaryF32 name = nullptr;
  KILN_VEC_UNARY_NAMES(KILN_VEC_FIELD)
#undef KILN_VEC_FIELD
#define KILN_VEC_FIELD(name) VecUnaryParamF32 name = nullptr;
  KILN_VEC_UNARY_PARAM_NAMES(KILN_VEC_FIELD)
#undef KILN_VEC_FIELD
  VecUnaryBf16Table bf16;  // the unary functions for bfloat16 arrays
  VecSoftmaxRowF32 softmax_row = nullptr;
  VecSoftmaxRowBf16 softmax_row_bf16 = nullptr;
  VecSoftmaxRowsStreamF32 softmax_rows_stream = nullptr;
  VecSoftmaxColumnsF32 softmax_columns = nullptr;
  VecSoftmaxShortRowsF32 softmax_short_rows = nullptr;
  VecSoftmaxShortRowsBf16 softmax_short_rows_bf16 = nullptr;
  VecLogSumExpRowF32 logsumexp_row = nullptr;
  VecBoxMullerF32 box_muller = nullptr;
  VecToI64F32 to_i64 = nullptr;
  VecMaxTapsF32 max_taps = nullptr;
  VecMaxTapsBf16 max_taps_bf16 = nullptr;
  VecToI32F32 to_i32 = nullptr;
  VecDotF32 dot = nullptr;
  VecDot4F32 dot4 = nullptr;
  VecDotTileF32 dot_tile = nullptr;
  VecDotTileBf16 dot_tile_bf16 = nullptr;  // widening; see dot_tile_bf16_kernel (gemm_bf16.h)
  VecWidenBf16 widen_bf16 = nullptr;
  VecNarrowBf16 narrow_bf16 = nullptr;
  VecWidenF16 widen_f16 = nullptr;
  VecNarrowF16 narrow_f16 = nullptr;
  VecDotF32F16 dot_f16 = nullptr;
  VecDot4F32F16 dot4_f16 = nullptr;
  VecBinaryF16 add_f16 = nullptr, sub_f16 = nullptr, mul_f16 = nullptr, div_f16 = nullptr,
               max_f16 = nullptr, min_f16 = nullptr;
  VecMulAddF16 muladd_f16 = nullptr;
  VecMulAddBf16 muladd_bf16 = nullptr;
  VecMulAddF32 muladd_f32 = nullptr;
  VecLerpF32 lerp_f32 = nullptr;
  VecLerpF32 lerp_rounded_twice_f32 = nullptr;
  VecLerpPositionsF32 lerp_positions_f32 = nullptr;
  VecLerpRowsPositionsF32 lerp_rows_positions_f32 = nullptr;
  VecLerpBf16 lerp_bf16 = nullptr;
  VecBinaryBf16 add_bf16 = nullptr, sub_bf16 = nullptr, mul_bf16 = nullptr, div_bf16 = nullptr,
                max_bf16 = nullptr, min_bf16 = nullptr;  // max / min: NaN-propagating
  VecBinaryF32 add_f32 = nullptr, sub_f32 = nullptr, mul_f32 = nullptr, div_f32 = nullptr,
               max_f32 = nullptr, min_f32 = nullptr;
  VecNormAffineF32 norm_affine = nullptr;
  VecNormAffineBf16 norm_affine_bf16 = nullptr;
  // The float32 unary functions and add / sub / mul / div writing their whole vectors with
  // non-temporal stores (the other entries null), for outputs far beyond the cache
  // (kiln/tensor/streaming_store.h); the caller fences (detail::stream_fence) after its last
  // call. Null at the baseline level and where such outputs take the buffered path
  // (detail::run_streamed) instead: on Intel, or as KILN_STREAMED_STORES says (decision 0150).
  const VecMathF32* streamed = nullptr;
};

const VecMathF32& vec_math_avx2();
const VecMathF32& vec_math_avx512();

// The table for the current ISA level; null entries (baseline level) mean "use scalar code".
const VecMathF32& vec_math_f32();

}  // namespace kiln::cpu
