// Factories (tensor, as_tensor, zeros, ones, full, empty, arange, linspace, eye, *_like,
// scalar_tensor) and random ops (rand, randn, randint, randperm, bernoulli, multinomial,
// dropout, uniform_/normal_/bernoulli_). Keywords follow PyTorch: dtype, device,
// requires_grad, generator; sizes as varargs or one sequence.
#include <mutex>

#include "bind.h"
#include "kiln/tensor/empty.h"

namespace kiln::py {

namespace {

using Self = nb::handle_t<Tensor>;

struct Kw {
  std::optional<DType> dtype;
  std::optional<Device> device;
  bool requires_grad = false;
  Generator* generator = nullptr;
  std::optional<MemoryFormat> memory_format;
  nb::handle size;

  TensorOptions options(DType fallback) const {
    TensorOptions o(dtype.value_or(fallback));
    if (device) o.device = *device;
    return o;
  }
};

// torch.set_default_device: where factories called from Python without device= put their
// tensors (nullopt: the CPU). As torch's device mode, it covers the factories (including the
// ones nn modules call), not *_like (which follow their input) nor kiln's C++ code.
std::mutex g_default_device_mutex;
std::optional<Device> g_default_device;

std::optional<Device> default_device() {
  std::lock_guard lock(g_default_device_mutex);
  return g_default_device;
}

// like: a *_like factory (its device defaults to its input's, not to the default device).
Kw parse_kw(const nb::kwargs& kwargs, bool like = false) {
  Kw k;
  for (auto [key, value] : kwargs) {
    std::string n = nb::cast<std::string>(key);
    if (n == "dtype") { if (!value.is_none()) k.dtype = dtype_arg(value); }
    else if (n == "device") { if (!value.is_none()) k.device = device_arg(value); }
    else if (n == "requires_grad") k.requires_grad = nb::cast<bool>(value);
    else if (n == "generator") { if (!value.is_none()) k.generator = nb::cast<Generator*>(value); }
    else if (n == "size") k.size = value;
    else if (n == "layout") check_layout_arg(value);
    else if (n == "memory_format") k.memory_format = memory_format_arg(value);
    else if (n == "pin_memory" || n == "out") {
      KILN_CHECK(n != "out" || value.is_none(), NotImplementedError, "out= is not supported");
    } else {
      KILN_THROW(TypeError, "got an unexpected keyword argument '", n, "'");
    }
  }
  if (!like && !k.device) k.device = default_device();
  return k;
}

Tensor finish(Tensor t, const Kw& k) {
  if (k.requires_grad) autograd::set_requires_grad(t, true);
  return t;
}

// A new tensor's values in the layout that memory_format= asks for: the strides of `like`
// (a *_like factory's input) under preserve_format, its default, as PyTorch's empty_like
// (a transposed or channels-last input gives a transposed or channels-last result).
Tensor laid_out(Tensor made, std::optional<MemoryFormat> format, const Tensor* like) {
  const MemoryFormat f = format.value_or(like ? MemoryFormat::Preserve : MemoryFormat::Contiguous);
  if (f == MemoryFormat::Contiguous || (f == MemoryFormat::Preserve && !like)) return made;
  const Strides strides = f == MemoryFormat::ChannelsLast
                              ? channels_last_strides(made.shape())
                              : preserve_format_strides(like->shape(), like->strides());
  if (strides == made.strides()) return made;
  Tensor out = empty_strided_tensor(made.shape(), strides, made.dtype(), made.device());
  copy_(out, made);
  return out;
}

Shape size_of(const nb::args& args, const Kw& k, const char* factory) {
  if (k.size.is_valid()) return shape_from_handle(k.size, "size");
  // zeros() is torch's TypeError; a 0-d tensor is zeros(()) / zeros([]).
  KILN_CHECK(args.size() > 0, TypeError, factory,
             "() missing 1 required positional arguments: \"size\"");
  return shape_from_args(args, "size");
}

// A factory over a shape: kiln.zeros(2, 3, dtype=...) / kiln.zeros((2, 3)).
template <typename F>
void def_shape_factory(nb::module_& m, const char* name, F make) {
  m.def(name, [make, name](nb::args args, nb::kwargs kwargs) {
    Kw k = parse_kw(kwargs);
    Shape s = size_of(args, k, name);
    return finish(nogil([&] { return laid_out(make(s, k), k.memory_format, nullptr); }), k);
  });
}

// *_like(input, dtype=None, device=None, requires_grad=False)
template <typename F>
void def_like(nb::module_& m, const char* name, F make) {
  m.def(name, [make](const Tensor& x, nb::kwargs kwargs) {
    Kw k = parse_kw(kwargs, /*like=*/true);
    if (!k.dtype) k.dtype = x.dtype();
    if (!k.device) k.device = x.device();
    return finish(nogil([&] { return laid_out(make(x.shape(), k), k.memory_format, &x); }), k);
  }, nb::arg("input"), nb::arg("kwargs"));
}

}  // namespace

void bind_factories(nb::module_& m) {
  m.def("tensor", [](nb::handle data, nb::kwargs kwargs) {
    Kw k = parse_kw(kwargs);
    return finish(tensor_from_data(data, k.dtype, k.device), k);
  }, nb::arg("data"), nb::arg("kwargs"));
  m.def("as_tensor", [](nb::handle data, std::optional<DType> dtype, std::optional<Device> device) {
    if (nb::isinstance<Tensor>(data)) {
      const Tensor& t = nb::cast<const Tensor&>(data);
      return nogil([&] {
        Tensor r = t;
        if (device && resolve_device(*device) != r.device()) r = to_device(r, *device);
        if (dtype && *dtype != r.dtype()) r = to_dtype(r, *dtype);
        return r;
      });
    }
    return tensor_from_data(data, dtype, device ? device : default_device());
  }, nb::arg("data"), nb::arg("dtype") = nb::none(), nb::arg("device") = nb::none());
  m.def("_set_default_device", [](std::optional<Device> device) {
    std::lock_guard lock(g_default_device_mutex);
    g_default_device = device;
  }, nb::arg("device").none());
  m.def("_get_default_device", [] { return default_device(); });  // None: the CPU
  m.def("scalar_tensor", [](const Scalar& s, nb::kwargs kwargs) {
    Kw k = parse_kw(kwargs);
    return finish(nogil([&] { return scalar_tensor(s, k.options(default_float_dtype())); }), k);
  }, nb::arg("s"), nb::arg("kwargs"));

  def_shape_factory(m, "zeros", [](const Shape& s, const Kw& k) {
    return zeros(s, k.options(default_float_dtype())); });
  def_shape_factory(m, "ones", [](const Shape& s, const Kw& k) {
    return ones(s, k.options(default_float_dtype())); });
  def_shape_factory(m, "empty", [](const Shape& s, const Kw& k) {
    return empty(s, k.options(default_float_dtype())); });
  def_shape_factory(m, "rand", [](const Shape& s, const Kw& k) {
    return rand(s, k.options(default_float_dtype()), k.generator); });
  def_shape_factory(m, "randn", [](const Shape& s, const Kw& k) {
    return randn(s, k.options(default_float_dtype()), k.generator); });
  m.def("full", [](nb::handle size, const Scalar& value, nb::kwargs kwargs) {
    Kw k = parse_kw(kwargs);
    Shape s = shape_from_handle(size, "size");
    TensorOptions o;
    o.dtype = k.dtype;
    if (k.device) o.device = *k.device;
    return finish(nogil([&] { return full(s, value, o); }), k);
  }, nb::arg("size"), nb::arg("fill_value"), nb::arg("kwargs"));

  // arange(end) / arange(start, end, step=1)
  m.def("arange", [](const Scalar& a, std::optional<Scalar> b, const Scalar& step, nb::kwargs kwargs) {
    Kw k = parse_kw(kwargs);
    TensorOptions o;
    o.dtype = k.dtype;
    if (k.device) o.device = *k.device;
    return finish(nogil([&] { return b ? arange(a, *b, step, o) : arange(a, o); }), k);
  }, nb::arg("start"), nb::arg("end") = nb::none(), nb::arg("step") = 1, nb::arg("kwargs"));
  m.def("linspace", [](const Scalar& a, const Scalar& b, int64_t steps, nb::kwargs kwargs) {
    Kw k = parse_kw(kwargs);
    return finish(nogil([&] { return linspace(a, b, steps, k.options(default_float_dtype())); }), k);
  }, nb::arg("start"), nb::arg("end"), nb::arg("steps"), nb::arg("kwargs"));
  m.def("eye", [](int64_t n, std::optional<int64_t> mm, nb::kwargs kwargs) {
    Kw k = parse_kw(kwargs);
    return finish(nogil([&] { return eye(n, mm, k.options(default_float_dtype())); }), k);
  }, nb::arg("n"), nb::arg("m") = nb::none(), nb::arg("kwargs"));

  // randint(high, size) / randint(low, high, size)
  m.def("randint", [](nb::args args, nb::kwargs kwargs) {
    Kw k = parse_kw(kwargs);
    int64_t low = 0, high;
    nb::handle size = k.size;
    size_t n = args.size();
    if (!size.is_valid()) {
      KILN_CHECK(n >= 2, TypeError, "randint() missing required argument 'size'");
      size = args[n - 1];
      --n;
    }
    KILN_CHECK(n == 1 || n == 2, TypeError, "randint() takes (high, size) or (low, high, size)");
    if (n == 2) low = nb::cast<int64_t>(args[0]);
    high = nb::cast<int64_t>(args[n - 1]);
    Shape s = shape_from_handle(size, "size");
    return finish(nogil([&] { return randint(low, high, s, k.options(DType::I64), k.generator); }), k);
  });
  m.def("randperm", [](int64_t n, nb::kwargs kwargs) {
    Kw k = parse_kw(kwargs);
    return finish(nogil([&] { return randperm(n, k.options(DType::I64), k.generator); }), k);
  }, nb::arg("n"), nb::arg("kwargs"));

  def_like(m, "zeros_like", [](const Shape& s, const Kw& k) { return zeros(s, k.options(DType::F32)); });
  def_like(m, "ones_like", [](const Shape& s, const Kw& k) { return ones(s, k.options(DType::F32)); });
  def_like(m, "empty_like", [](const Shape& s, const Kw& k) { return empty(s, k.options(DType::F32)); });
  def_like(m, "rand_like", [](const Shape& s, const Kw& k) {
    return rand(s, k.options(DType::F32), k.generator); });
  def_like(m, "randn_like", [](const Shape& s, const Kw& k) {
    return randn(s, k.options(DType::F32), k.generator); });
  m.def("full_like", [](const Tensor& x, const Scalar& v, nb::kwargs kwargs) {
    Kw k = parse_kw(kwargs, /*like=*/true);
    TensorOptions o(k.dtype.value_or(x.dtype()), k.device.value_or(x.device()));
    return finish(nogil([&] { return laid_out(full(x.shape(), v, o), k.memory_format, &x); }), k);
  }, nb::arg("input"), nb::arg("fill_value"), nb::arg("kwargs"));
  m.def("randint_like", [](const Tensor& x, nb::args args, nb::kwargs kwargs) {
    Kw k = parse_kw(kwargs, /*like=*/true);
    KILN_CHECK(args.size() == 1 || args.size() == 2, TypeError,
               "randint_like() takes (input, high) or (input, low, high)");
    int64_t low = args.size() == 2 ? nb::cast<int64_t>(args[0]) : 0;
    int64_t high = nb::cast<int64_t>(args[args.size() - 1]);
    TensorOptions o(k.dtype.value_or(x.dtype()), k.device.value_or(x.device()));
    return finish(nogil([&] {
      return laid_out(randint(low, high, x.shape(), o, k.generator), k.memory_format, &x);
    }), k);
  }, nb::arg("input"), nb::arg("args"), nb::arg("kwargs"));

  // Random ops on tensors.
  m.def("bernoulli", [](const Tensor& p, Generator* g) { return nogil([&] { return bernoulli(p, g); }); },
        nb::arg("input"), nb::kw_only(), nb::arg("generator") = nb::none());
  m.def("multinomial", [](const Tensor& p, int64_t n, bool replacement, Generator* g) {
    return nogil([&] { return multinomial(p, n, replacement, g); });
  }, nb::arg("input"), nb::arg("num_samples"), nb::arg("replacement") = false, nb::kw_only(),
     nb::arg("generator") = nb::none());
  // Samplers with a variable number of draws per value (src/kiln/ops/random_sampling.cpp).
  m.def("_standard_gamma", [](const Tensor& alpha, Generator* g) {
    return nogil([&] { return standard_gamma(alpha, g); });
  }, nb::arg("input"), nb::kw_only(), nb::arg("generator") = nb::none());
  m.def("poisson", [](const Tensor& rates, Generator* g) {
    return nogil([&] { return poisson(rates, g); });
  }, nb::arg("input"), nb::kw_only(), nb::arg("generator") = nb::none());
  m.def("binomial", [](const Tensor& count, const Tensor& prob, Generator* g) {
    return nogil([&] { return binomial(count, prob, g); });
  }, nb::arg("count"), nb::arg("prob"), nb::kw_only(), nb::arg("generator") = nb::none());
  m.def("_standard_gamma_grad", [](const Tensor& alpha, const Tensor& sample) {
    return nogil([&] { return standard_gamma_grad(alpha, sample); });
  }, nb::arg("input"), nb::arg("output"));
  m.def("dropout", [](const Tensor& x, double p, bool train, Generator* g) {
    return nogil([&] { return dropout(x, p, train, g); });
  }, nb::arg("input"), nb::arg("p") = 0.5, nb::arg("train") = true, nb::kw_only(),
     nb::arg("generator") = nb::none());
}

void bind_random_methods(nb::class_<Tensor>& cls) {
  cls.def("uniform_", [](Self s, double from, double to, Generator* g) {
    Tensor& t = *nb::inst_ptr<Tensor>(s);
    nogil([&] { uniform_(t, from, to, g); });
    return nb::borrow(s);
  }, nb::arg("from_") = 0.0, nb::arg("to") = 1.0, nb::kw_only(), nb::arg("generator") = nb::none());
  cls.def("normal_", [](Self s, double mean, double std, Generator* g) {
    Tensor& t = *nb::inst_ptr<Tensor>(s);
    nogil([&] { normal_(t, mean, std, g); });
    return nb::borrow(s);
  }, nb::arg("mean") = 0.0, nb::arg("std") = 1.0, nb::kw_only(), nb::arg("generator") = nb::none());
  cls.def("bernoulli_", [](Self s, double p, Generator* g) {
    Tensor& t = *nb::inst_ptr<Tensor>(s);
    nogil([&] { bernoulli_(t, p, g); });
    return nb::borrow(s);
  }, nb::arg("p") = 0.5, nb::kw_only(), nb::arg("generator") = nb::none());
  cls.def("bernoulli", [](const Tensor& p, Generator* g) { return nogil([&] { return bernoulli(p, g); }); },
          nb::kw_only(), nb::arg("generator") = nb::none());
  cls.def("multinomial", [](const Tensor& p, int64_t n, bool replacement, Generator* g) {
    return nogil([&] { return multinomial(p, n, replacement, g); });
  }, nb::arg("num_samples"), nb::arg("replacement") = false, nb::kw_only(),
     nb::arg("generator") = nb::none());
}

}  // namespace kiln::py
