#pragma once
// data::Dataset: indexed access to examples, as torch.utils.data.Dataset (map-style).
//
// An Example is the tuple of tensors one index gives ({image, label}, {tokens, target}, ...);
// a Batch is the same tuple with a leading batch dimension on every tensor. Datasets are
// read by DataLoader from a worker thread, so get() and get_batch() must be safe to call
// from another thread than the one that built the dataset (const, no shared mutable state).
#include <cstdint>
#include <vector>

#include "kiln/tensor/tensor.h"

namespace kiln::data {

using Example = std::vector<Tensor>;
using Batch = std::vector<Tensor>;

class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual int64_t size() const = 0;
  // The example at index (0 <= index < size(); IndexError otherwise).
  virtual Example get(int64_t index) const = 0;
  // The examples at indices stacked into a batch. The default calls get() for each index
  // and collates; datasets backed by whole tensors override it with one gather per tensor.
  virtual Batch get_batch(const std::vector<int64_t>& indices) const;
};

// Stacks the i-th tensor of every example along a new dimension 0. ValueError when the
// examples have different numbers of tensors, ShapeError (from stack) when shapes differ,
// ValueError for an empty list.
Batch collate(const std::vector<Example>& examples);

// Tensors sharing their first dimension; example i is {t[i] for each tensor t}
// (torch.utils.data.TensorDataset).
class TensorDataset : public Dataset {
 public:
  // ValueError when the list is empty, a tensor is 0-d or undefined, or the first
  // dimensions differ.
  explicit TensorDataset(std::vector<Tensor> tensors);
  int64_t size() const override { return size_; }
  Example get(int64_t index) const override;
  Batch get_batch(const std::vector<int64_t>& indices) const override;
  const std::vector<Tensor>& tensors() const { return tensors_; }

 private:
  std::vector<Tensor> tensors_;
  int64_t size_ = 0;
};

// IndexError unless 0 <= index < size ("what" names the caller in the message).
void check_index(const char* what, int64_t index, int64_t size);

}  // namespace kiln::data
