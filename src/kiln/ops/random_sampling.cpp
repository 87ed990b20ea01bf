// The samplers with a variable number of draws per value (_standard_gamma, poisson, binomial)
// and _standard_gamma_grad: definitions and public functions.
//
// Each reserves one Philox block per output element; element i then draws from the
// unbounded stream philox4x32(seed, offset + i, j), j = 0, 1, ... (the contract in
// src/kiln/backends/cpu/rejection_samplers.h). Inputs reach the kernels contiguous and, for
// the two-input ops, broadcast to one shape, so kernels index them flat.
#include "kiln/ops/copy.h"
#include "kiln/ops/op_helpers.h"
#include "kiln/ops/random.h"
#include "kiln/ops/views.h"

namespace kiln {

namespace {

void check_float_input(const char* op, const char* what, const Tensor& t) {
  KILN_CHECK(t.defined(), Error, op, ": expected a tensor for ", what, ", got an undefined one");
  KILN_CHECK(is_floating(t.dtype()), NotImplementedError, "\"", op, "\" not implemented for '",
             dtype_name(t.dtype()), "': expected a floating-point tensor for ", what);
}

// Reserves a block per element of an output of n elements; the (seed, offset) attrs.
std::vector<AttrValue> reserve_per_element(Generator* gen, Device device, int64_t n) {
  Generator& g = gen ? *gen : default_generator(device);
  const uint64_t seed = g.seed();
  const uint64_t offset = g.reserve(uint64_t(n));
  return {AttrValue(int64_t(seed)), AttrValue(int64_t(offset))};
}

// a and b broadcast to one shape and made contiguous (the kernels' flat indexing).
std::pair<Tensor, Tensor> broadcast_pair(const char* op, const Tensor& a, const Tensor& b) {
  KILN_CHECK(a.device() == b.device(), Error, op, ": expected both tensors on one device, got ",
             a.device().str(), " and ", b.device().str());
  KILN_CHECK(a.dtype() == b.dtype(), Error, op, ": expected both tensors of one dtype, got ",
             dtype_name(a.dtype()), " and ", dtype_name(b.dtype()));
  const Shape shape = broadcast_shapes(a.shape(), b.shape());
  return {expand(a, shape).contiguous(), expand(b, shape).contiguous()};
}

}  // namespace

Tensor standard_gamma(const Tensor& alpha, Generator* gen) {
  check_float_input("_standard_gamma", "alpha", alpha);
  Tensor a = alpha.contiguous();
  return call_op(KILN_OP("_standard_gamma"), {a},
                 reserve_per_element(gen, a.device(), a.numel()));
}

Tensor poisson(const Tensor& rates, Generator* gen) {
  check_float_input("poisson", "rates", rates);
  Tensor r = rates.contiguous();
  return call_op(KILN_OP("poisson"), {r}, reserve_per_element(gen, r.device(), r.numel()));
}

Tensor binomial(const Tensor& count, const Tensor& prob, Generator* gen) {
  check_float_input("binomial", "count", count);
  check_float_input("binomial", "prob", prob);
  auto [c, p] = broadcast_pair("binomial", count, prob);
  return call_op(KILN_OP("binomial"), {c, p}, reserve_per_element(gen, c.device(), c.numel()));
}

Tensor standard_gamma_grad(const Tensor& alpha, const Tensor& sample) {
  check_float_input("_standard_gamma_grad", "alpha", alpha);
  check_float_input("_standard_gamma_grad", "sample", sample);
  auto [a, x] = broadcast_pair("_standard_gamma_grad", alpha, sample);
  return call_op(KILN_OP("_standard_gamma_grad"), {a, x}, {});
}

namespace ops {
void register_random_sampling_ops() {
  register_op("_standard_gamma", "_standard_gamma(Tensor self, *, int seed, int offset) -> Tensor",
              same_as_first_meta).random = true;
  register_op("poisson", "poisson(Tensor self, *, int seed, int offset) -> Tensor",
              same_as_first_meta).random = true;
  register_op("binomial",
              "binomial(Tensor count, Tensor prob, *, int seed, int offset) -> Tensor",
              same_as_first_meta).random = true;
  register_op("_standard_gamma_grad", "_standard_gamma_grad(Tensor self, Tensor output) -> Tensor",
              same_as_first_meta);
}
}  // namespace ops

}  // namespace kiln
