#pragma once
// kiln::save / kiln::load: state dicts (name -> tensor) as safetensors files, readable by
// Python's safetensors.torch.load_file and every other safetensors reader.
#include <map>
#include <string>

#include "kiln/io/safetensors_writer.h"
#include "kiln/runtime/device.h"
#include "kiln/tensor/tensor.h"

namespace kiln {

// Writes the tensors (any dtype, device and layout) to path, atomically; see
// io::save_safetensors for the file layout and the errors.
void save(const std::map<std::string, Tensor>& tensors, const std::string& path,
          const io::SafetensorsMetadata& metadata = {});

// Reads every tensor of the safetensors file at path onto device (contiguous copies that
// do not require grad). Errors as io::SafetensorsFile::open and tensor().
std::map<std::string, Tensor> load(const std::string& path,
                                   Device device = Device(DeviceType::CPU, 0));

}  // namespace kiln
