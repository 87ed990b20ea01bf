#pragma once
// data::MnistDataset: MNIST-format image/label file pairs (MNIST, Fashion-MNIST, KMNIST),
// as torchvision.datasets.FashionMNIST with transforms.ToTensor(): example i is
// {image [1, H, W] float32 in [0, 1] (pixel / 255), label int64 0-d}. On Debian the
// Fashion-MNIST files come with the dataset-fashion-mnist package, in
// /usr/share/datasets/fashion-mnist/ (train-images-idx3-ubyte.gz, ...).
#include <string>

#include "kiln/data/dataset.h"

namespace kiln::data {

class MnistDataset : public Dataset {
 public:
  // Reads both IDX files (plain or gzip; see read_idx). ValueError naming the file unless
  // the images are uint8 [N, H, W] and the labels uint8 [N] with the same N.
  MnistDataset(const std::string& images_path, const std::string& labels_path);

  int64_t size() const override { return images_.size(0); }
  Example get(int64_t index) const override;
  Batch get_batch(const std::vector<int64_t>& indices) const override;

  // The raw data: uint8 [N, H, W] images and int64 [N] labels.
  const Tensor& images() const { return images_; }
  const Tensor& labels() const { return labels_; }

  // Where the dataset-fashion-mnist package puts the files.
  static constexpr const char* kFashionMnistDir = "/usr/share/datasets/fashion-mnist";

 private:
  Tensor images_;
  Tensor labels_;
};

}  // namespace kiln::data
