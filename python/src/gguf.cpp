// kiln._C._gguf: GGUF files (kiln::io::GGUFFile) and the ggml block formats
// (kiln::quant: ggml_linear, dequantize, quantize). python/kiln/gguf.py and quant.py wrap it.
#include <nanobind/stl/pair.h>
#include <nanobind/stl/tuple.h>

#include "bind.h"
#include "kiln/io/gguf_file.h"
#include "kiln/quant/ggml_linear.h"
#include "kiln/quant/ggml_types.h"

namespace kiln::py {

namespace {

using io::GGUFValue;
using io::GGUFValueType;

// Strings of a file (keys, names, values) need not be UTF-8 (a byte-level vocabulary, a
// corrupted file): bytes that are not are kept as surrogate escapes rather than failing.
nb::object py_str(const std::string& s) {
  return nb::steal(PyUnicode_DecodeUTF8(s.data(), Py_ssize_t(s.size()), "surrogateescape"));
}

// The inverse, for names passed back in.
std::string name_arg(nb::handle h) {
  if (!PyUnicode_Check(h.ptr())) throw TypeError("expected a tensor name (str)");
  nb::object b = nb::steal(PyUnicode_AsEncodedString(h.ptr(), "utf-8", "surrogateescape"));
  if (!b.is_valid()) throw nb::python_error();
  return std::string(PyBytes_AsString(b.ptr()), size_t(PyBytes_Size(b.ptr())));
}

nb::object value_to_python(const GGUFValue& v) {
  switch (v.type) {
    case GGUFValueType::U8: case GGUFValueType::U16: case GGUFValueType::U32:
    case GGUFValueType::U64:
      return nb::int_(v.uint_value);
    case GGUFValueType::I8: case GGUFValueType::I16: case GGUFValueType::I32:
    case GGUFValueType::I64:
      return nb::int_(v.int_value);
    case GGUFValueType::F32: case GGUFValueType::F64: return nb::float_(v.float_value);
    case GGUFValueType::Bool: return nb::bool_(v.bool_value);
    case GGUFValueType::String: return py_str(v.string_value);
    case GGUFValueType::Array: {
      nb::list out;
      for (const GGUFValue& item : v.items) out.append(value_to_python(item));
      return out;
    }
  }
  return nb::none();
}

const char* value_type_name(GGUFValueType t) {
  static const char* names[] = {"u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool",
                                "string", "array", "u64", "i64", "f64"};
  return names[uint32_t(t)];
}

quant::GGMLType type_arg(int64_t t) {
  const quant::GGMLTypeInfo* info = quant::ggml_type_info(uint32_t(t));
  if (info == nullptr || t < 0)
    throw TypeError("unknown ggml type number " + std::to_string(t));
  return info->type;
}

}  // namespace

void bind_gguf(nb::module_& parent) {
  nb::module_ m = parent.def_submodule("_gguf", "GGUF files and ggml block formats");
  nb::class_<io::GGUFFile>(m, "GGUFFile")
      .def_static("open", [](const std::string& path) {
        return nogil([&] { return io::GGUFFile::open(path); });
      }, nb::arg("path"))
      .def_static("from_bytes", [](nb::bytes data, const std::string& name) {
        return io::GGUFFile::from_buffer(data.c_str(), data.size(), name);
      }, nb::arg("data"), nb::arg("name") = "<bytes>")
      .def_prop_ro("path", &io::GGUFFile::path)
      .def_prop_ro("version", &io::GGUFFile::version)
      .def_prop_ro("alignment", &io::GGUFFile::alignment)
      .def_prop_ro("data_offset", &io::GGUFFile::data_offset)
      .def("metadata", [](const io::GGUFFile& f) {
        nb::dict out;
        for (const auto& [k, v] : f.metadata()) out[py_str(k)] = value_to_python(v);
        return out;
      })
      .def("metadata_types", [](const io::GGUFFile& f) {
        nb::dict out;
        for (const auto& [k, v] : f.metadata()) {
          std::string t = value_type_name(v.type);
          if (v.type == GGUFValueType::Array) t += std::string("[") + value_type_name(v.elem_type) + "]";
          out[py_str(k)] = nb::str(t.c_str());
        }
        return out;
      })
      .def("tensor_infos", [](const io::GGUFFile& f) {
        nb::list out;
        for (const io::GGUFTensorInfo& t : f.tensors())
          out.append(nb::make_tuple(py_str(t.name),
                                    quant::ggml_type_info(t.type).name, int64_t(t.type),
                                    make_size(t.shape), t.offset, t.nbytes));
        return out;
      })
      .def("tensor", [](const io::GGUFFile& f, nb::handle h, bool copy) {
        const std::string name = name_arg(h);
        return nogil([&] { return f.tensor(name, copy); });
      }, nb::arg("name"), nb::arg("copy") = false)
      .def("dequantize", [](const io::GGUFFile& f, nb::handle h) {
        const std::string name = name_arg(h);
        return nogil([&] { return f.dequantize(name); });
      }, nb::arg("name"));

  m.def("types", [] {
    nb::list out;
    for (uint32_t t = 0; t < 64; ++t)
      if (const quant::GGMLTypeInfo* i = quant::ggml_type_info(t))
        out.append(nb::make_tuple(i->name, int64_t(t), i->block_elems, i->block_bytes, i->quantized));
    return out;
  });
  m.def("ggml_linear", [](const Tensor& x, const Tensor& w, int64_t type, int64_t in_features,
                          std::optional<Tensor> bias) {
    const quant::GGMLType t = type_arg(type);
    return nogil([&] { return quant::ggml_linear(x, w, t, in_features, bias.value_or(Tensor())); });
  }, nb::arg("input"), nb::arg("weight"), nb::arg("type"), nb::arg("in_features"),
     nb::arg("bias").none() = nb::none());
  m.def("has_kernel", [](int64_t type) { return quant::ggml_linear_has_kernel(type_arg(type)); });
  m.def("kernel_isa", [] { return std::string(quant::ggml_linear_isa()); });
  // Raw blocks uint8 [rows, row_bytes] -> float32 [rows, cols].
  m.def("dequantize", [](const Tensor& raw, int64_t type, int64_t cols) {
    const quant::GGMLType t = type_arg(type);
    if (raw.dtype() != DType::U8 || raw.dim() != 2 || !raw.device().is_cpu())
      throw TypeError("dequantize: expected raw blocks as a uint8 [rows, row_bytes] CPU tensor");
    const int64_t row_bytes = quant::ggml_row_bytes(t, cols);
    if (raw.size(1) != row_bytes)
      throw ValueError("dequantize: rows of " + std::to_string(cols) + " " +
                       quant::ggml_type_info(t).name + " values take " + std::to_string(row_bytes) +
                       " bytes, got rows of " + std::to_string(raw.size(1)));
    return nogil([&] {
      Tensor src = raw.contiguous();
      Tensor out = empty({raw.size(0), cols}, DType::F32);
      const uint8_t* s = static_cast<const uint8_t*>(src.raw_data());
      float* d = out.data_ptr<float>();
      for (int64_t r = 0; r < raw.size(0); ++r)
        quant::dequantize_ggml_row(t, s + r * row_bytes, d + r * cols, cols);
      return out;
    });
  }, nb::arg("raw"), nb::arg("type"), nb::arg("cols"));
  // float [rows, cols] -> raw blocks uint8 [rows, row_bytes] (Q8_0, Q4_0).
  m.def("quantize", [](const Tensor& x, int64_t type) {
    const quant::GGMLType t = type_arg(type);
    if (x.dim() != 2 || !is_floating(x.dtype()) || !x.device().is_cpu())
      throw TypeError("quantize: expected a float [rows, cols] CPU tensor");
    const int64_t cols = x.size(1);
    const int64_t row_bytes = quant::ggml_row_bytes(t, cols);
    return nogil([&] {
      Tensor src = x.to(DType::F32).contiguous();
      Tensor out = empty({x.size(0), row_bytes}, DType::U8);
      const float* s = src.data_ptr<float>();
      uint8_t* d = static_cast<uint8_t*>(out.raw_data());
      for (int64_t r = 0; r < x.size(0); ++r)
        quant::quantize_ggml_row(t, s + r * cols, d + r * row_bytes, cols);
      return out;
    });
  }, nb::arg("input"), nb::arg("type"));
}

}  // namespace kiln::py
