#include "kiln/dispatch/op_call.h"

#include "kiln/dispatch/registry.h"

namespace kiln {

namespace {
template <typename T>
const T& get_attr(const OpCall& c, size_t i, const char* what) {
  KILN_INTERNAL_ASSERT(i < c.attrs.size(), "op '", c.op ? c.op->name : "?", "' has no attr ", i);
  const T* v = std::get_if<T>(&c.attrs[i]);
  KILN_INTERNAL_ASSERT(v != nullptr, "op '", c.op ? c.op->name : "?", "' attr ", i,
                       " is not a ", what);
  return *v;
}
}  // namespace

int64_t OpCall::int_attr(size_t i) const {
  if (i < attrs.size())
    if (auto* s = std::get_if<Scalar>(&attrs[i])) return s->to_int();
  return get_attr<int64_t>(*this, i, "int");
}
double OpCall::double_attr(size_t i) const {
  if (i < attrs.size()) {
    if (auto* s = std::get_if<Scalar>(&attrs[i])) return s->to_double();
    if (auto* n = std::get_if<int64_t>(&attrs[i])) return double(*n);
  }
  return get_attr<double>(*this, i, "float");
}
bool OpCall::bool_attr(size_t i) const { return get_attr<bool>(*this, i, "bool"); }
const Scalar& OpCall::scalar_attr(size_t i) const { return get_attr<Scalar>(*this, i, "Scalar"); }
const std::vector<int64_t>& OpCall::ints_attr(size_t i) const {
  return get_attr<std::vector<int64_t>>(*this, i, "int[]");
}
DType OpCall::dtype_attr(size_t i) const { return get_attr<DType>(*this, i, "dtype"); }
const std::string& OpCall::string_attr(size_t i) const {
  return get_attr<std::string>(*this, i, "string");
}

}  // namespace kiln
