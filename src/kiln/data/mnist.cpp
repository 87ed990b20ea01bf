// data::MnistDataset: IDX image and label files as float images and int64 labels.
#include "kiln/data/mnist.h"

#include "kiln/data/idx.h"
#include "kiln/ops/copy.h"
#include "kiln/ops/factory.h"
#include "kiln/ops/indexing.h"

namespace kiln::data {

namespace {
// uint8 pixels [..., H, W] to float32 in [0, 1], as torchvision's ToTensor.
Tensor to_unit_float(const Tensor& pixels) { return to_dtype(pixels, DType::F32) / 255.0; }
}  // namespace

MnistDataset::MnistDataset(const std::string& images_path, const std::string& labels_path) {
  images_ = read_idx(images_path);
  Tensor labels = read_idx(labels_path);
  KILN_CHECK(images_.dtype() == DType::U8 && images_.dim() == 3, ValueError, "MnistDataset: ",
             images_path, ": expected uint8 images of shape [N, H, W], got ",
             dtype_name(images_.dtype()), " ", shape_str(images_.shape()));
  KILN_CHECK(labels.dtype() == DType::U8 && labels.dim() == 1, ValueError, "MnistDataset: ",
             labels_path, ": expected uint8 labels of shape [N], got ",
             dtype_name(labels.dtype()), " ", shape_str(labels.shape()));
  KILN_CHECK(labels.size(0) == images_.size(0), ValueError, "MnistDataset: ", images_path,
             " holds ", images_.size(0), " images but ", labels_path, " holds ",
             labels.size(0), " labels");
  labels_ = to_dtype(labels, DType::I64);
}

Example MnistDataset::get(int64_t index) const {
  check_index("MnistDataset", index, size());
  return {to_unit_float(images_.select(0, index).unsqueeze(0)), labels_.select(0, index).clone()};
}

Batch MnistDataset::get_batch(const std::vector<int64_t>& indices) const {
  for (int64_t i : indices) check_index("MnistDataset", i, size());
  Tensor index = tensor_from(indices, {int64_t(indices.size())}, DType::I64);
  return {to_unit_float(index_select(images_, 0, index).unsqueeze(1)),
          index_select(labels_, 0, index)};
}

}  // namespace kiln::data
