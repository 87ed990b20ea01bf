#include "kiln/io/safetensors_file.h"

#include "kiln/io/json_reader.h"
#include "kiln/io/mapped_file.h"
#include "kiln/io/safetensors_header.h"
#include "kiln/ops/factory.h"

namespace kiln::io {

struct SafetensorsFile::State {
  std::string path;
  std::unique_ptr<detail::FileBytes> bytes;
  detail::ParsedHeader header;

  const detail::HeaderEntry& entry(const std::string& name) const {
    const detail::HeaderEntry* e = header.find(name);
    KILN_CHECK(e != nullptr, ValueError, "safetensors file ", detail::quote_for_message(path, 1024),
               " has no tensor ", detail::quote_for_message(name), " (it holds ",
               header.entries.size(), " tensors)");
    return *e;
  }
  const uint8_t* tensor_data(const TensorInfo& info) const {
    return bytes->data() + 8 + header.header_size + info.begin;
  }
};

namespace {

std::shared_ptr<const SafetensorsFile::State> make_state(std::string path,
                                                         std::unique_ptr<detail::FileBytes> bytes) {
  auto s = std::make_shared<SafetensorsFile::State>();
  s->header = detail::parse_safetensors_header(bytes->data(), bytes->size(), path);
  s->path = std::move(path);
  s->bytes = std::move(bytes);
  return s;
}

}  // namespace

SafetensorsFile SafetensorsFile::open(const std::string& path) {
  return SafetensorsFile(make_state(path, std::make_unique<detail::MappedFile>(path)));
}

SafetensorsFile SafetensorsFile::from_buffer(const void* data, size_t size, const std::string& name) {
  return SafetensorsFile(make_state(name, std::make_unique<detail::OwnedBytes>(data, size)));
}

const std::string& SafetensorsFile::path() const { return state_->path; }
size_t SafetensorsFile::size() const { return state_->header.entries.size(); }
bool SafetensorsFile::contains(const std::string& name) const {
  return state_->header.find(name) != nullptr;
}

std::vector<std::string> SafetensorsFile::names() const {
  std::vector<std::string> out;
  out.reserve(state_->header.entries.size());
  for (const auto& e : state_->header.entries) out.push_back(e.name);
  return out;
}

const TensorInfo& SafetensorsFile::info(const std::string& name) const {
  return state_->entry(name).info;
}

std::span<const uint8_t> SafetensorsFile::bytes(const std::string& name) const {
  const TensorInfo& info = state_->entry(name).info;
  return {state_->tensor_data(info), size_t(info.nbytes())};
}

Tensor SafetensorsFile::tensor(const std::string& name, Device device) const {
  const TensorInfo& info = state_->entry(name).info;
  const uint8_t* p = state_->tensor_data(info);
  if (info.dtype == DType::Bool) {
    // kiln's bool kernels rely on 0/1 bytes; anything else is corrupt data, not a value.
    for (uint64_t i = 0; i < info.nbytes(); ++i) {
      KILN_CHECK(p[i] <= 1, ValueError, "safetensors file ",
                 detail::quote_for_message(state_->path, 1024), ": tensor ",
                 detail::quote_for_message(name), " has dtype BOOL but its element ", i,
                 " is the byte ", int(p[i]), " (booleans must be stored as 0 or 1)");
    }
  }
  return from_blob_copy(p, info.shape, info.dtype, device);
}

const std::map<std::string, std::string>& SafetensorsFile::metadata() const {
  return state_->header.metadata;
}

uint64_t SafetensorsFile::header_size() const { return state_->header.header_size; }
uint64_t SafetensorsFile::data_offset() const { return 8 + state_->header.header_size; }
uint64_t SafetensorsFile::file_size() const { return state_->bytes->size(); }

}  // namespace kiln::io
