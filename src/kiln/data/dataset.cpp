// data::Dataset's default batching, collate, and TensorDataset.
#include "kiln/data/dataset.h"

#include "kiln/ops/copy.h"
#include "kiln/ops/factory.h"
#include "kiln/ops/indexing.h"

namespace kiln::data {

void check_index(const char* what, int64_t index, int64_t size) {
  KILN_CHECK(index >= 0 && index < size, IndexError, what, ": index ", index,
             " is out of range for a dataset of size ", size);
}

Batch Dataset::get_batch(const std::vector<int64_t>& indices) const {
  std::vector<Example> examples;
  examples.reserve(indices.size());
  for (int64_t i : indices) examples.push_back(get(i));
  return collate(examples);
}

Batch collate(const std::vector<Example>& examples) {
  KILN_CHECK(!examples.empty(), ValueError, "collate: expected at least one example, got none");
  const size_t fields = examples[0].size();
  for (size_t e = 1; e < examples.size(); ++e)
    KILN_CHECK(examples[e].size() == fields, ValueError, "collate: example 0 has ", fields,
               " tensors but example ", e, " has ", examples[e].size());
  Batch batch;
  batch.reserve(fields);
  std::vector<Tensor> column(examples.size());
  for (size_t f = 0; f < fields; ++f) {
    for (size_t e = 0; e < examples.size(); ++e) {
      KILN_CHECK(examples[e][f].defined(), ValueError, "collate: tensor ", f, " of example ", e,
                 " is undefined");
      column[e] = examples[e][f];
    }
    batch.push_back(stack(column, 0));
  }
  return batch;
}

TensorDataset::TensorDataset(std::vector<Tensor> tensors) : tensors_(std::move(tensors)) {
  KILN_CHECK(!tensors_.empty(), ValueError, "TensorDataset: expected at least one tensor, got none");
  for (size_t i = 0; i < tensors_.size(); ++i) {
    KILN_CHECK(tensors_[i].defined(), ValueError, "TensorDataset: tensor ", i, " is undefined");
    KILN_CHECK(tensors_[i].dim() >= 1, ValueError, "TensorDataset: tensor ", i,
               " is 0-d; every tensor needs a first (example) dimension");
    KILN_CHECK(tensors_[i].size(0) == tensors_[0].size(0), ValueError,
               "TensorDataset: size mismatch between tensors: tensor 0 has ", tensors_[0].size(0),
               " examples, tensor ", i, " has ", tensors_[i].size(0));
  }
  size_ = tensors_[0].size(0);
}

Example TensorDataset::get(int64_t index) const {
  check_index("TensorDataset", index, size_);
  Example ex;
  ex.reserve(tensors_.size());
  for (const Tensor& t : tensors_) ex.push_back(t.select(0, index));
  return ex;
}

Batch TensorDataset::get_batch(const std::vector<int64_t>& indices) const {
  for (int64_t i : indices) check_index("TensorDataset", i, size_);
  Tensor host_index = tensor_from(indices, {int64_t(indices.size())}, DType::I64);
  Batch batch;
  batch.reserve(tensors_.size());
  // One gather per tensor: the result is a fresh contiguous tensor, never a view of the data.
  for (const Tensor& t : tensors_)
    batch.push_back(index_select(t, 0, to_device(host_index, t.device())));
  return batch;
}

}  // namespace kiln::data
