#include "kiln/dispatch/registry.h"
#include "kiln/dispatch/registration.h"

#include <deque>
#include <map>
#include <mutex>
#include <shared_mutex>

namespace kiln {

namespace {
// Op definitions live in a deque so their addresses stay stable; lookups by name go through
// a sorted map. Registration happens at start-up; lookups are read-mostly.
struct Registry {
  std::shared_mutex mutex;
  std::deque<OpDef> ops;
  std::map<std::string, OpDef*, std::less<>> by_name;
  std::array<KernelFn, kNumDeviceTypes> default_kernels{};
};
Registry& registry() {
  static Registry* r = new Registry();  // never destroyed: ops outlive static destructors
  return *r;
}

OpDef& add_op(std::string name, std::string schema) {
  auto& r = registry();
  std::unique_lock lock(r.mutex);
  KILN_INTERNAL_ASSERT(!r.by_name.count(name), "op '", name, "' registered twice");
  OpDef& def = r.ops.emplace_back();
  def.name = std::move(name);
  def.schema = std::move(schema);
  r.by_name.emplace(def.name, &def);
  return def;
}
}  // namespace

OpDef& register_op(std::string name, std::string schema, MetaFn meta) {
  OpDef& d = add_op(std::move(name), std::move(schema));
  d.meta = meta;
  return d;
}
OpDef& register_view_op(std::string name, std::string schema, ViewFn view) {
  OpDef& d = add_op(std::move(name), std::move(schema));
  d.view = view;
  return d;
}
OpDef& register_composite_op(std::string name, std::string schema, CompositeFn fn) {
  OpDef& d = add_op(std::move(name), std::move(schema));
  d.composite = fn;
  return d;
}

void register_kernel(std::string_view op, DeviceType device, KernelFn fn, DTypeMask dtypes) {
  auto& r = registry();
  std::unique_lock lock(r.mutex);
  auto it = r.by_name.find(op);
  KILN_INTERNAL_ASSERT(it != r.by_name.end(), "kernel for unknown op '", op, "'");
  const bool complex_only = dtypes != 0 && (dtypes & ~kComplexDTypes) == 0;
  (complex_only ? it->second->complex_kernels : it->second->kernels)[size_t(device)] =
      KernelEntry{fn, dtypes};
}

KernelEntry detail::registered_kernel(std::string_view op, DeviceType device) {
  auto& r = registry();
  std::shared_lock lock(r.mutex);
  auto it = r.by_name.find(op);
  return it == r.by_name.end() ? KernelEntry{} : it->second->kernels[size_t(device)];
}

const OpDef* find_op(std::string_view name) noexcept {
  ensure_ops_registered();
  auto& r = registry();
  std::shared_lock lock(r.mutex);
  auto it = r.by_name.find(name);
  return it == r.by_name.end() ? nullptr : it->second;
}

const OpDef& get_op(std::string_view name) {
  const OpDef* d = find_op(name);
  KILN_CHECK(d != nullptr, NotImplementedError, "unknown op '", name, "'");
  return *d;
}

std::vector<const OpDef*> all_ops() {
  ensure_ops_registered();
  auto& r = registry();
  std::shared_lock lock(r.mutex);
  std::vector<const OpDef*> out;
  for (auto& [name, def] : r.by_name) out.push_back(def);
  return out;
}

void set_default_kernel(DeviceType device, KernelFn fn) {
  registry().default_kernels[size_t(device)] = fn;
}
KernelFn default_kernel(DeviceType device) { return registry().default_kernels[size_t(device)]; }

}  // namespace kiln
