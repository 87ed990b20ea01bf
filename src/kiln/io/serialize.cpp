#include "kiln/io/serialize.h"

#include "kiln/io/safetensors_file.h"

namespace kiln {

void save(const std::map<std::string, Tensor>& tensors, const std::string& path,
          const io::SafetensorsMetadata& metadata) {
  io::save_safetensors(path, tensors, metadata);
}

std::map<std::string, Tensor> load(const std::string& path, Device device) {
  io::SafetensorsFile file = io::SafetensorsFile::open(path);
  std::map<std::string, Tensor> out;
  for (const std::string& name : file.names()) out.emplace(name, file.tensor(name, device));
  return out;
}

}  // namespace kiln
