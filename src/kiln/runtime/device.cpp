// DeviceType names and Device parsing/printing.
#include "kiln/runtime/device.h"

#include <charconv>
#include <limits>
#include <ostream>

#include "kiln/core/error.h"

namespace kiln {

namespace {
// Indexed by DeviceType; keep in the enum's order.
constexpr std::string_view kTypeNames[kNumDeviceTypes] = {"cpu", "xpu", "testing", "meta"};
constexpr std::string_view kTypeList = "cpu, xpu, testing, meta";
}  // namespace

std::string_view device_type_name(DeviceType t) {
  auto i = size_t(t);
  return i < size_t(kNumDeviceTypes) ? kTypeNames[i] : std::string_view("unknown");
}

DeviceType device_type_from_name(std::string_view name) {
  for (int i = 0; i < kNumDeviceTypes; ++i) {
    if (kTypeNames[i] == name) return DeviceType(i);
  }
  KILN_THROW(DeviceError, "unknown device type '", name, "'; expected one of: ", kTypeList);
}

Device Device::parse(std::string_view spec) {
  auto colon = spec.find(':');
  std::string_view type_part = spec.substr(0, colon);
  DeviceType type;
  try {
    type = device_type_from_name(type_part);
  } catch (const DeviceError&) {
    KILN_THROW(DeviceError, "invalid device string '", spec,
               "': expected '<type>' or '<type>:<index>' with <type> one of ", kTypeList,
               ", got type '", type_part, "'");
  }
  if (colon == std::string_view::npos) return Device(type);

  // The index: decimal digits only (no sign, no spaces), and it must fit the Device field.
  std::string_view idx_part = spec.substr(colon + 1);
  int value = -1;
  const char* first = idx_part.data();
  const char* last = first + idx_part.size();
  auto [end, ec] = std::from_chars(first, last, value);
  bool digits_only = !idx_part.empty() && idx_part.front() >= '0' && idx_part.front() <= '9';
  if (!digits_only || ec != std::errc() || end != last ||
      value > std::numeric_limits<int16_t>::max()) {
    KILN_THROW(DeviceError, "invalid device string '", spec, "': expected '", type_part,
               ":<index>' with a non-negative integer index below 32768, got index '",
               idx_part, "'");
  }
  return Device(type, value);
}

std::string Device::str() const {
  std::string s(device_type_name(type));
  if (has_index()) s += ":" + std::to_string(index);
  return s;
}

std::ostream& operator<<(std::ostream& os, const Device& d) { return os << d.str(); }

}  // namespace kiln
