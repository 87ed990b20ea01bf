// Random ops and the random factories: definitions (schema + meta) and the public functions.
//
// The public function runs on the host thread: it checks the arguments, reserves a range of
// Philox blocks from the generator (the device's default one when none is given) and passes
// the generator's seed and the first reserved counter to the kernel as the last two int attrs
// (`seed`, `offset`, both uint64 values stored bit for bit in int64). Kernels never see the
// Generator: they may run later, on another thread, on any backend, and compute draw k of
// the op from philox4x32(seed, offset + block(k)) alone. The draw-to-element mapping (the
// contract every backend's kernel implements; see src/kiln/backends/cpu/random_kernels.cpp):
//
//   32-bit draw k: word k % 4 of block offset + k / 4
//   64-bit draw k: words 2*(k % 2) (low half) and 2*(k % 2) + 1 (high half) of block
//                  offset + k / 2
//
// and element i (row-major logical index of the output, whatever its memory layout) uses
//   uniform_, float16/bfloat16/float32: 32-bit draw i;   float64: 64-bit draw i
//   normal_,  float16/bfloat16/float32: 32-bit draws 2*(i/2) and 2*(i/2)+1 (Box-Muller;
//             even i takes the cosine branch, odd i the sine branch); float64: the same
//             with 64-bit draws
//   bernoulli_, bernoulli, dropout: 32-bit draw i
//   random_ (randint): 32-bit draw i when to - from <= 2^32, else 64-bit draw i
//   multinomial: with replacement 64-bit draw r * num_samples + j for sample j of row r;
//                without replacement 64-bit draw r * categories + c for category c of row r
//   randperm: 64-bit draw i is the sort key of index i
//
// So a seed gives the same values on every backend, independent of threads and layouts.
#include "kiln/ops/random.h"

#include <cmath>
#include <limits>

#include "kiln/ops/complex.h"
#include "kiln/ops/copy.h"
#include "kiln/ops/op_helpers.h"
#include "kiln/runtime/stream.h"

namespace kiln {

namespace {

constexpr uint64_t kTwoPow32 = uint64_t(1) << 32;

uint64_t ceil_div(uint64_t a, uint64_t b) { return a / b + (a % b != 0); }
// Philox blocks holding draws [0, n) of the given width.
uint64_t blocks_for_32bit_draws(uint64_t n) { return ceil_div(n, 4); }
uint64_t blocks_for_64bit_draws(uint64_t n) { return ceil_div(n, 2); }

Generator& generator_for(Generator* gen, Device device) {
  return gen ? *gen : default_generator(device);
}

// Reserves n_blocks from the generator; returns the (seed, offset) attrs for the kernel.
std::pair<AttrValue, AttrValue> reserve(Generator& g, uint64_t n_blocks) {
  // seed() and reserve() are separate calls; manual_seed racing with a random op on another
  // thread may pair the new seed with an old offset, which is still a valid stream.
  uint64_t seed = g.seed();
  uint64_t offset = g.reserve(n_blocks);
  return {AttrValue(int64_t(seed)), AttrValue(int64_t(offset))};
}

void check_floating(const char* op, const Tensor& x) {
  KILN_CHECK(is_floating(x.dtype()), NotImplementedError, "\"", op, "\" not implemented for '",
             dtype_name(x.dtype()), "': expected a floating-point tensor");
}

// The inclusive range of integers a dtype holds exactly.
std::pair<int64_t, int64_t> exact_integer_range(DType dtype) {
  switch (dtype) {
    case DType::Bool: return {0, 1};
    case DType::U8: return {0, 255};
    case DType::I8: return {-128, 127};
    case DType::I16: return {-32768, 32767};
    case DType::I32:
      return {std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max()};
    case DType::I64:
      return {std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max()};
    case DType::F16: return {-(int64_t(1) << 11), int64_t(1) << 11};
    case DType::BF16: return {-(int64_t(1) << 8), int64_t(1) << 8};
    case DType::F32: return {-(int64_t(1) << 24), int64_t(1) << 24};
    case DType::F64: return {-(int64_t(1) << 53), int64_t(1) << 53};
    case DType::C64: return {-(int64_t(1) << 24), int64_t(1) << 24};
    case DType::C128: return {-(int64_t(1) << 53), int64_t(1) << 53};
  }
  return {0, 0};
}

// Bounds of random_ (randint): [from, to) must hold values the dtype represents exactly.
void check_random_bounds(int64_t from, int64_t to, DType dtype) {
  KILN_CHECK(from < to, Error, "random_ expects 'from' to be less than 'to', but got from=",
             from, " >= to=", to);
  auto [lo, hi] = exact_integer_range(dtype);
  KILN_CHECK(from >= lo && to - 1 <= hi, Error, "random_ expects [from, to) to lie within [",
             lo, ", ", hi, "] for dtype ", dtype_name(dtype),
             " (the integers it holds exactly), but got from=", from, ", to=", to);
}

std::vector<TensorMeta> multinomial_meta(const OpCall& call) {
  const Tensor& probs = call.inputs[0];
  int64_t n = call.int_attr(0);
  if (probs.dim() == 1) return {{{n}, DType::I64}};
  return {{{probs.size(0), n}, DType::I64}};
}

std::vector<TensorMeta> randperm_meta(const OpCall& call) {
  return {{{call.int_attr(0)}, call.dtype_attr(1)}};
}

// Runs an in-place random op writing x (no tensor inputs; x is the output) with the op's
// own attrs followed by the reserved (seed, offset).
void fill_random(const OpDef& op, Tensor& x, AttrValue a0, AttrValue a1, Generator* gen,
                 uint64_t n_blocks) {
  auto [seed, offset] = reserve(generator_for(gen, x.device()), n_blocks);
  std::vector<AttrValue> attrs;
  attrs.reserve(4);
  attrs.push_back(std::move(a0));
  if (!std::holds_alternative<std::monostate>(a1)) attrs.push_back(std::move(a1));
  attrs.push_back(std::move(seed));
  attrs.push_back(std::move(offset));
  call_op_out(op, {}, std::move(attrs), {x});
}

}  // namespace

Tensor& uniform_(Tensor& x, double from, double to, Generator* gen) {
  if (is_complex(x.dtype())) {  // as PyTorch: real and imaginary parts each from [from, to)
    Tensor parts = view_as_real(x);
    uniform_(parts, from, to, gen);
    return x;
  }
  check_floating("uniform_", x);
  KILN_CHECK(std::isfinite(from) && std::isfinite(to), Error,
             "uniform_ expects finite bounds, but got from=", from, " and to=", to);
  KILN_CHECK(from <= to, Error, "uniform_ expects to return a [from, to) range, but found from=",
             from, " > to=", to);
  KILN_CHECK(to - from <= std::numeric_limits<double>::max(), Error,
             "uniform_ expects to-from <= std::numeric_limits<double>::max(), but found to=", to,
             " and from=", from, " which result in to-from to exceed the limit");
  uint64_t n = uint64_t(x.numel());
  uint64_t blocks = x.dtype() == DType::F64 ? blocks_for_64bit_draws(n) : blocks_for_32bit_draws(n);
  fill_random(KILN_OP("uniform_"), x, from, to, gen, blocks);
  return x;
}

Tensor& normal_(Tensor& x, double mean, double std, Generator* gen) {
  if (is_complex(x.dtype())) {
    // As PyTorch: real and imaginary parts independent N(mean, std^2 / 2), so that
    // E|z - mean(1 + i)|^2 = std^2.
    KILN_CHECK(std >= 0.0, Error, "normal expects std >= 0.0, but found std ", std);
    Tensor parts = view_as_real(x);
    normal_(parts, mean, std / std::sqrt(2.0), gen);
    return x;
  }
  check_floating("normal_", x);
  KILN_CHECK(std >= 0.0, Error, "normal expects std >= 0.0, but found std ", std);
  uint64_t n = uint64_t(x.numel());
  uint64_t draws = 2 * ceil_div(n, 2);  // Box-Muller consumes draws in pairs
  uint64_t blocks =
      x.dtype() == DType::F64 ? blocks_for_64bit_draws(draws) : blocks_for_32bit_draws(draws);
  fill_random(KILN_OP("normal_"), x, mean, std, gen, blocks);
  return x;
}

Tensor& bernoulli_(Tensor& x, double p, Generator* gen) {
  KILN_CHECK(p >= 0 && p <= 1, Error, "bernoulli_ expects p to be in [0, 1], but got p=", p);
  fill_random(KILN_OP("bernoulli_"), x, p, AttrValue(), gen,
              blocks_for_32bit_draws(uint64_t(x.numel())));
  return x;
}

Tensor bernoulli(const Tensor& probs, Generator* gen) {
  check_floating("bernoulli", probs);
  auto [seed, offset] = reserve(generator_for(gen, probs.device()),
                                blocks_for_32bit_draws(uint64_t(probs.numel())));
  return call_op(KILN_OP("bernoulli"), {probs}, {seed, offset});
}

Tensor dropout(const Tensor& x, double p, bool train, Generator* gen) {
  KILN_CHECK(p >= 0 && p <= 1, ValueError, "dropout probability has to be between 0 and 1, but got ",
             p);
  // As PyTorch: no dropout (and no draw) when not training, for p = 0 and for empty inputs.
  if (!train || p == 0 || x.numel() == 0) return x;
  if (p == 1) return zeros_like(x);
  KILN_CHECK(is_floating(x.dtype()), Error, "dropout: expected a floating-point input for p in "
             "(0, 1) (the kept elements are scaled by 1/(1-p)), but got ", dtype_name(x.dtype()));
  auto [seed, offset] =
      reserve(generator_for(gen, x.device()), blocks_for_32bit_draws(uint64_t(x.numel())));
  return call_op(KILN_OP("dropout"), {x}, {p, seed, offset});
}

Tensor multinomial(const Tensor& probs, int64_t num_samples, bool replacement, Generator* gen) {
  KILN_CHECK(probs.dim() == 1 || probs.dim() == 2, Error, "prob_dist must be 1 or 2 dim, got ",
             probs.dim(), " dims");
  KILN_CHECK(is_floating(probs.dtype()), Error,
             "multinomial only supports floating-point dtypes for input, got: ",
             dtype_name(probs.dtype()));
  KILN_CHECK(num_samples > 0, Error, "cannot sample n_sample <= 0 samples");
  int64_t categories = probs.size(-1);
  KILN_CHECK(replacement || num_samples <= categories, Error,
             "cannot sample n_sample > prob_dist.size(-1) samples without replacement (n_sample=",
             num_samples, ", prob_dist.size(-1)=", categories, ")");
  KILN_CHECK(categories <= (int64_t(1) << 24), Error,
             "number of categories cannot exceed 2^24");
  uint64_t rows = probs.dim() == 1 ? 1 : uint64_t(probs.size(0));
  uint64_t draws = rows * uint64_t(replacement ? num_samples : categories);
  auto [seed, offset] = reserve(generator_for(gen, probs.device()), blocks_for_64bit_draws(draws));
  return call_op(KILN_OP("multinomial"), {probs}, {num_samples, replacement, seed, offset});
}

Tensor randperm(int64_t n, TensorOptions opts, Generator* gen) {
  KILN_CHECK(n >= 0, Error, "randperm: n must be non-negative, got ", n);
  DType dtype = opts.dtype.value_or(DType::I64);
  KILN_CHECK(dtype != DType::Bool, NotImplementedError, "\"randperm\" not implemented for 'bool'");
  KILN_CHECK(n - 1 <= exact_integer_range(dtype).second, Error,
             "randperm: n is too large for result tensor type: '", dtype_name(dtype),
             "' (n=", n, ", the largest index it holds exactly is ",
             exact_integer_range(dtype).second, ")");
  Device device = resolve_device(opts.device);
  auto [seed, offset] = reserve(generator_for(gen, device), blocks_for_64bit_draws(uint64_t(n)));
  return call_factory(KILN_OP("randperm"), device, {n, dtype, seed, offset});
}

Tensor rand(const Shape& shape, TensorOptions opts, Generator* gen) {
  Tensor t = empty(shape, opts);
  uniform_(t, 0.0, 1.0, gen);
  return t;
}

Tensor randn(const Shape& shape, TensorOptions opts, Generator* gen) {
  Tensor t = empty(shape, opts);
  normal_(t, 0.0, 1.0, gen);
  return t;
}

Tensor randint(int64_t low, int64_t high, const Shape& shape, TensorOptions opts,
               Generator* gen) {
  DType dtype = opts.dtype.value_or(DType::I64);
  check_random_bounds(low, high, dtype);
  Tensor t = empty_tensor(shape, dtype, opts.device);
  uint64_t range = uint64_t(high) - uint64_t(low);
  uint64_t n = uint64_t(t.numel());
  uint64_t blocks = range <= kTwoPow32 ? blocks_for_32bit_draws(n) : blocks_for_64bit_draws(n);
  fill_random(KILN_OP("random_"), t, low, high, gen, blocks);
  return t;
}

namespace ops {
void register_random_ops() {
  register_op("uniform_",
              "uniform_(Tensor(a!) self, float from=0, float to=1, *, int seed, int offset) -> Tensor(a!)",
              out_meta).random = true;
  register_op("normal_",
              "normal_(Tensor(a!) self, float mean=0, float std=1, *, int seed, int offset) -> Tensor(a!)",
              out_meta).random = true;
  register_op("bernoulli_",
              "bernoulli_(Tensor(a!) self, float p=0.5, *, int seed, int offset) -> Tensor(a!)",
              out_meta).random = true;
  register_op("random_",
              "random_(Tensor(a!) self, int from, int to, *, int seed, int offset) -> Tensor(a!)",
              out_meta).random = true;
  register_op("bernoulli", "bernoulli(Tensor self, *, int seed, int offset) -> Tensor",
              same_as_first_meta).random = true;
  register_op("dropout", "dropout(Tensor input, float p, *, int seed, int offset) -> Tensor",
              same_as_first_meta).random = true;
  register_op("multinomial",
              "multinomial(Tensor self, int num_samples, bool replacement=False, *, int seed, "
              "int offset) -> Tensor",
              multinomial_meta).random = true;
  register_op("randperm", "randperm(int n, ScalarType dtype, *, int seed, int offset) -> Tensor",
              randperm_meta).random = true;
}
}  // namespace ops

}  // namespace kiln
