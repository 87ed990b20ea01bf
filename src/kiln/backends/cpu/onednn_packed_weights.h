#pragma once
// Weights in a oneDNN primitive's own layout, reordered once per weight tensor and reused
// until the weight changes (shared by onednn_conv.cpp and onednn_linear.cpp). oneDNN given
// plain weights repacks them on every call (1.1-3x slower: ../shared/HARDWARE.md); caching
// the packed copy with the weight removes that. Built only with KILN_HAVE_DNNL.
#ifdef KILN_HAVE_DNNL
#include <memory>
#include <string>

#include <oneapi/dnnl/dnnl.hpp>

#include "kiln/backends/cpu/onednn.h"
#include "kiln/tensor/tensor.h"
#include "own_packed_weights.h"

namespace kiln::cpu {

// A packed weight's oneDNN memory and the buffer behind it (null when the memory is the
// weight's own): hold it while the memory is in use, since the cache may drop its entry
// meanwhile (another thread packing the 513th weight).
struct PackedWeightMemory {
  dnnl::memory memory;
  std::shared_ptr<void> buffer;
};

// `weight` (its data described by `user`) in the layout `packed`. The cache entry is keyed
// by the weight's storage, its offset and `layout_key` (the caller's name for the weight's
// role and shape); it holds a weak reference to the storage and the version counter seen when
// packing, so a freed or modified weight is never served a stale copy. When `packed` equals
// `user` the weight's own memory is returned and nothing is cached.
PackedWeightMemory onednn_packed_weight(const Tensor& weight, const std::string& layout_key,
                                        const dnnl::memory::desc& user,
                                        const dnnl::memory::desc& packed,
                                        dnnl::stream& stream);

// Whether a plain operand was seen before unchanged (worth packing once, decision 0031):
// operand_seen_unchanged in own_packed_weights.h, shared with kiln's own kernels.
// Products with fewer rows than this do not pack a reused plain operand (decision 0031).
inline constexpr int64_t kOnednnPackMinRows = 64;

// onednn_clear_packed_weights / onednn_packed_weight_count: kiln/backends/cpu/onednn.h.

}  // namespace kiln::cpu
#endif  // KILN_HAVE_DNNL
