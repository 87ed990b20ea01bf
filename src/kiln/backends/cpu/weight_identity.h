#pragma once
// What the packed-weight caches (onednn_packed_weights.cpp, own_packed_weights.cpp) key on: a
// tensor's storage address and offset under the caller's layout key, and — checked on every
// hit — the storage itself (a weak reference: a freed storage's address may be reused) and the
// version counter (an in-place change of the weight). Foreign memory (NumPy, DLPack) is never
// described: writes by its owner change no version counter, so a cached copy could go stale;
// nor is kiln memory exported since the copy was made (its export epoch moved).
#include <cstring>
#include <memory>
#include <string>

#include "kiln/tensor/tensor.h"
#include "kiln/tensor/tensor_impl.h"

namespace kiln::cpu {

inline std::string weight_memory_key(const Tensor& t, const std::string& layout_key) {
  const int64_t where[2] = {int64_t(reinterpret_cast<uintptr_t>(t.impl()->storage().get())),
                            t.storage_offset()};
  std::string key = layout_key + '|';
  key.append(reinterpret_cast<const char*>(where), sizeof where);
  return key;
}

struct WeightIdentity {
  std::weak_ptr<StorageImpl> storage;
  uint64_t version = 0;
  uint64_t export_epoch = 0;  // exported since (StorageImpl::begin_export): maybe written

  static WeightIdentity of(const Tensor& t) {
    return {t.impl()->storage(), t.version(), t.impl()->storage()->export_epoch()};
  }
  // Whether t's contents can be tracked at all (by the version counter).
  static bool trackable(const Tensor& t) { return !t.impl()->storage()->foreign(); }
  // Whether this still describes t's memory and contents.
  bool describes(const Tensor& t) const {
    return trackable(t) && storage.lock() == t.impl()->storage() && version == t.version() &&
           export_epoch == t.impl()->storage()->export_epoch();
  }
};

}  // namespace kiln::cpu
