#include "kiln/io/gguf_file.h"

#include "gguf_parse.h"
#include "kiln/core/error.h"
#include "kiln/io/json_reader.h"
#include "kiln/io/mapped_file.h"
#include "kiln/ops/factory.h"
#include "kiln/tensor/tensor_impl.h"

namespace kiln::io {

int64_t GGUFTensorInfo::numel() const {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}

struct GGUFFile::State {
  std::string path;
  std::unique_ptr<detail::FileBytes> bytes;
  detail::ParsedGGUF parsed;

  const GGUFTensorInfo& entry(const std::string& name) const {
    auto it = parsed.tensor_index.find(name);
    KILN_CHECK(it != parsed.tensor_index.end(), ValueError, "GGUF file ",
               detail::quote_for_message(path, 1024), " has no tensor ",
               detail::quote_for_message(name), " (it holds ", parsed.tensors.size(), " tensors)");
    return parsed.tensors[it->second];
  }
  const uint8_t* data(const GGUFTensorInfo& t) const {
    return bytes->data() + parsed.data_offset + t.offset;
  }
};

namespace {

std::shared_ptr<const GGUFFile::State> make_state(std::string path,
                                                  std::unique_ptr<detail::FileBytes> bytes) {
  auto s = std::make_shared<GGUFFile::State>();
  s->parsed = detail::parse_gguf(bytes->data(), bytes->size(), path);
  s->path = std::move(path);
  s->bytes = std::move(bytes);
  return s;
}

DType plain_dtype(quant::GGMLType t) {
  switch (t) {
    case quant::GGMLType::F32: return DType::F32;
    case quant::GGMLType::F16: return DType::F16;
    case quant::GGMLType::BF16: return DType::BF16;
    case quant::GGMLType::F64: return DType::F64;
    case quant::GGMLType::I8: return DType::I8;
    case quant::GGMLType::I16: return DType::I16;
    case quant::GGMLType::I32: return DType::I32;
    case quant::GGMLType::I64: return DType::I64;
    default: return DType::U8;
  }
}

}  // namespace

GGUFFile GGUFFile::open(const std::string& path) {
  return GGUFFile(make_state(path, std::make_unique<detail::MappedFile>(path, /*for_tensors=*/true)));
}

GGUFFile GGUFFile::from_buffer(const void* data, size_t size, const std::string& name) {
  return GGUFFile(make_state(name, std::make_unique<detail::OwnedBytes>(data, size)));
}

const std::string& GGUFFile::path() const { return state_->path; }
uint32_t GGUFFile::version() const { return state_->parsed.version; }
uint32_t GGUFFile::alignment() const { return state_->parsed.alignment; }
uint64_t GGUFFile::data_offset() const { return state_->parsed.data_offset; }

const std::vector<std::pair<std::string, GGUFValue>>& GGUFFile::metadata() const {
  return state_->parsed.metadata;
}

const GGUFValue* GGUFFile::find(const std::string& key) const {
  auto it = state_->parsed.key_index.find(key);
  return it == state_->parsed.key_index.end() ? nullptr : &state_->parsed.metadata[it->second].second;
}

const std::vector<GGUFTensorInfo>& GGUFFile::tensors() const { return state_->parsed.tensors; }
const GGUFTensorInfo& GGUFFile::info(const std::string& name) const { return state_->entry(name); }
bool GGUFFile::contains(const std::string& name) const {
  return state_->parsed.tensor_index.count(name) != 0;
}

std::span<const uint8_t> GGUFFile::bytes(const std::string& name) const {
  const GGUFTensorInfo& t = state_->entry(name);
  return {state_->data(t), size_t(t.nbytes)};
}

namespace {

// A CPU tensor whose storage is the tensor's bytes in the file image; the storage holds the
// file's state (and so its mapping) alive.
Tensor tensor_over_file(const std::shared_ptr<const GGUFFile::State>& state, uint8_t* data,
                        uint64_t nbytes, const Shape& shape, DType dtype) {
  auto* keep = new std::shared_ptr<const GGUFFile::State>(state);
  DataPtr ptr(data, keep, [](void* ctx, void*) {
    delete static_cast<std::shared_ptr<const GGUFFile::State>*>(ctx);
  }, Device(DeviceType::CPU, 0));
  auto storage = std::make_shared<StorageImpl>(std::move(ptr), size_t(nbytes));
  return Tensor(std::make_shared<TensorImpl>(std::move(storage), 0, shape, contiguous_strides(shape), dtype));
}

}  // namespace

Tensor GGUFFile::tensor(const std::string& name, bool copy) const {
  const GGUFTensorInfo& t = state_->entry(name);
  Shape shape = t.shape;
  DType dtype = plain_dtype(t.type);
  if (quant::ggml_type_info(t.type).quantized) {
    const int64_t row = quant::ggml_row_bytes(t.type, t.shape.back());
    shape = {row == 0 ? 0 : int64_t(t.nbytes) / row, row};
    dtype = DType::U8;
  }
  uint8_t* writable = state_->bytes->tensor_data();
  // Element-aligned bytes of a writable image back the tensor directly; otherwise a copy.
  if (copy || writable == nullptr || (state_->parsed.data_offset + t.offset) % element_size(dtype) != 0)
    return from_blob_copy(state_->data(t), shape, dtype, Device(DeviceType::CPU, 0));
  return tensor_over_file(state_, writable + state_->parsed.data_offset + t.offset, t.nbytes, shape,
                          dtype);
}

Tensor GGUFFile::dequantize(const std::string& name) const {
  const GGUFTensorInfo& t = state_->entry(name);
  const quant::GGMLTypeInfo& ti = quant::ggml_type_info(t.type);
  if (t.type == quant::GGMLType::F32 || t.type == quant::GGMLType::F64)
    return tensor(name, /*copy=*/true).to(DType::F32);
  KILN_CHECK(ti.quantized || t.type == quant::GGMLType::F16 || t.type == quant::GGMLType::BF16,
             TypeError, "GGUF tensor ", detail::quote_for_message(name), " has integer type ",
             ti.name, "; only float and quantised tensors can be dequantised");
  Tensor out = empty(t.shape, DType::F32);
  const int64_t n = t.numel();
  const int64_t cols = t.shape.back();
  if (n == 0 || cols == 0) return out;
  const int64_t rows = n / cols;
  const int64_t row_bytes = quant::ggml_row_bytes(t.type, cols);
  float* dst = out.data_ptr<float>();
  const uint8_t* src = state_->data(t);
#pragma omp parallel for schedule(static) if (n >= (int64_t(1) << 18))
  for (int64_t r = 0; r < rows; ++r)
    quant::dequantize_ggml_row(t.type, src + r * row_bytes, dst + r * cols, cols);
  return out;
}

}  // namespace kiln::io
