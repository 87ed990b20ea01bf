#pragma once
// DeviceType and Device: small value types naming where a tensor lives ("cpu", "testing:1").
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <string>
#include <string_view>

namespace kiln {

// Indexes the backend registry; keep values dense. Meta: tensors with a shape, dtype and
// strides but no data (PyTorch's meta device), for building models without memory and for
// shape inference.
enum class DeviceType : uint8_t { CPU = 0, XPU = 1, Testing = 2, Meta = 3 };
inline constexpr int kNumDeviceTypes = 4;

std::string_view device_type_name(DeviceType t);  // "cpu", "xpu", "testing", "meta"
DeviceType device_type_from_name(std::string_view name);  // throws DeviceError

struct Device {
  DeviceType type = DeviceType::CPU;
  int16_t index = -1;  // -1: "the current device of this type"

  constexpr Device() = default;
  constexpr Device(DeviceType t, int idx = -1) : type(t), index(int16_t(idx)) {}  // NOLINT
  // Parses "cpu", "testing", "testing:1", "xpu:0". Throws DeviceError on bad input.
  static Device parse(std::string_view spec);

  bool is_cpu() const { return type == DeviceType::CPU; }
  bool has_index() const { return index >= 0; }
  std::string str() const;  // "cpu", "testing:0"
  bool operator==(const Device& o) const { return type == o.type && index == o.index; }
  bool operator!=(const Device& o) const { return !(*this == o); }
};

std::ostream& operator<<(std::ostream& os, const Device& d);

}  // namespace kiln

template <>
struct std::hash<kiln::Device> {
  size_t operator()(const kiln::Device& d) const noexcept {
    return (size_t(d.type) << 16) ^ size_t(uint16_t(d.index));
  }
};
