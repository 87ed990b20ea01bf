// kiln.save / kiln.load: a dict of tensors as a safetensors file (kiln::save / kiln::load).
#include <nanobind/stl/map.h>

#include "bind.h"
#include "kiln/io/serialize.h"

namespace kiln::py {

void bind_io(nb::module_& m) {
  m.def("_save", [](const std::map<std::string, Tensor>& tensors, const std::string& path,
                    const std::map<std::string, std::string>& metadata) {
    nogil([&] { kiln::save(tensors, path, metadata); });
  }, nb::arg("tensors"), nb::arg("path"), nb::arg("metadata"));
  m.def("_load", [](const std::string& path, nb::handle device) {
    Device d = device.is_none() ? Device(DeviceType::CPU, 0) : device_arg(device, "map_location");
    std::map<std::string, Tensor> r = nogil([&] { return kiln::load(path, d); });
    nb::dict out;
    for (auto& [k, v] : r) out[nb::str(k.c_str())] = nb::cast(v);
    return out;
  }, nb::arg("path"), nb::arg("device").none());
}

}  // namespace kiln::py
