#pragma once
// Weights packed once for kiln's own blocked GEMM kernels (isa/gemm_packed_b.h), the
// counterpart of onednn_packed_weights.h for the products oneDNN does not take (float32 at the
// AVX2 level, bfloat16 below AVX-512 BF16, bfloat16 and int8 on AMX tiles, any product with
// oneDNN switched off). Same rules (decision 0043): keyed by the weight's storage, offset and
// the caller's layout key; a freed or modified weight (version counter) is never served a
// stale copy; entries of freed weights are dropped; all are dropped beyond kMaxCached.
#include <functional>
#include <memory>
#include <string>

#include "isa/gemm_packed_b.h"
#include "kiln/backends/cpu/packed_weights.h"
#include "kiln/tensor/tensor.h"

namespace kiln::cpu {

// The packed copy of `weight` under `layout_key` (which must name the kernel, dtype, shape and
// strides), made by `pack` when there is none for the weight's current contents.
std::shared_ptr<const GemmPackedB> own_packed_weight(const Tensor& weight,
                                                     const std::string& layout_key,
                                                     const std::function<GemmPackedB()>& pack);

// Whether `operand` was seen before under `layout_key` (the caller's name for its role, dtype,
// shape and strides) with the same storage, offset and version; records this sighting. The
// second use of an unchanged operand marks it as reused (a weight given to a plain matrix
// product), worth packing once (decision 0031); a one-off operand (an activation) never is.
// Up to 256 sightings are remembered (weak references), forgotten all at once when full.
// Used by the oneDNN matmul / int_mm paths and by kiln's own kernels.
bool operand_seen_unchanged(const Tensor& operand, const std::string& layout_key);
// `weight` rounded to `dtype` (a contiguous kiln tensor), kept like a packed copy against the
// weight's identity and version (same cache rules): the float32 weights that autocast leaves to
// fused_linear (decision 0121) for the products that do not take the tiles' packed copy (fewer
// than kAmxFewRowsMin rows, levels without AMX), which then read bfloat16 weights instead of
// rounding the float32 weight on every call. Foreign weights are rounded per call.
Tensor own_rounded_weight(const Tensor& weight, DType dtype);

// Whether a Linear weight has earned a whole packed copy (oneDNN's layout, or kiln's panels):
// kiln memory (not foreign) that a Linear saw before with the same storage, offset and version.
// Records this sighting (up to 4096 weights, forgotten all at once when full). A weight used
// once — a cast that autocast makes per forward, a weight computed per call, a weight being
// trained (its version moves every step) — is read by the plain kernels, which pack each block
// as they go: packed whole and used once it cost 1.5-2.5x the time of the product with the
// copy cached (decision 0120).
bool linear_weight_reused(const Tensor& weight);
// Below this many rows no Linear path packs its weight (oneDNN's Linear takes products from
// kOnednnLinearMinRows = 4 rows, onednn_runtime.h; AMX from kAmxFewRowsMin = 7), so fewer rows
// neither ask nor record.
inline constexpr int64_t kLinearPackMinRows = 4;

// Products with fewer rows than this do not pack a reused plain operand for kiln's own kernels
// (oneDNN's paths: kOnednnPackMinRows, decision 0031). Below 16 rows the matrix-vector and
// dot-tile kernels read the plain weight once anyway; from 16 the blocked kernel reads B once
// per 6-row tile, which from a packed copy is sequential (decision 0056: x[3, 12, 384] @
// W[384, 1536], weights not in cache, as in all-MiniLM-L6-v2 through ONNX).
inline constexpr int64_t kPackReusedMinRows = 16;

// own_packed_weight_count / own_clear_packed_weights: kiln/backends/cpu/packed_weights.h.

}  // namespace kiln::cpu
