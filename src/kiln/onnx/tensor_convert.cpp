#include "kiln/onnx/tensor_convert.h"

#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>
#include <vector>

#include <onnx/onnx-data.pb.h>

#include "kiln/onnx/external_data.h"
#include "kiln/onnx/tensor_proto.h"
#include "kiln/ops/factory.h"

namespace kiln::onnx {

std::string printable(const std::string& s, size_t max_chars) {
  std::string out;
  for (size_t i = 0; i < s.size() && i < max_chars; ++i) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    out += (c >= 32 && c < 127) ? char(c) : '?';
  }
  if (s.size() > max_chars) out += "...";
  return out;
}

std::string quoted(const std::string& s, size_t max_chars) { return "'" + printable(s, max_chars) + "'"; }

std::optional<DType> dtype_from_onnx(int32_t t) {
  switch (t) {
    case pb::TensorProto::FLOAT: return DType::F32;
    case pb::TensorProto::UINT8: return DType::U8;
    case pb::TensorProto::INT8: return DType::I8;
    case pb::TensorProto::INT16: return DType::I16;
    case pb::TensorProto::INT32: return DType::I32;
    case pb::TensorProto::INT64: return DType::I64;
    case pb::TensorProto::BOOL: return DType::Bool;
    case pb::TensorProto::FLOAT16: return DType::F16;
    case pb::TensorProto::DOUBLE: return DType::F64;
    case pb::TensorProto::BFLOAT16: return DType::BF16;
    default: return std::nullopt;
  }
}

int32_t onnx_type_from_dtype(DType d) {
  switch (d) {
    case DType::F32: return pb::TensorProto::FLOAT;
    case DType::U8: return pb::TensorProto::UINT8;
    case DType::I8: return pb::TensorProto::INT8;
    case DType::I16: return pb::TensorProto::INT16;
    case DType::I32: return pb::TensorProto::INT32;
    case DType::I64: return pb::TensorProto::INT64;
    case DType::Bool: return pb::TensorProto::BOOL;
    case DType::F16: return pb::TensorProto::FLOAT16;
    case DType::F64: return pb::TensorProto::DOUBLE;
    case DType::BF16: return pb::TensorProto::BFLOAT16;
    case DType::C64: return pb::TensorProto::COMPLEX64;
    case DType::C128: return pb::TensorProto::COMPLEX128;
  }
  return pb::TensorProto::UNDEFINED;
}

std::string onnx_type_name(int32_t t) {
  if (pb::TensorProto::DataType_IsValid(t))
    return pb::TensorProto::DataType_Name(static_cast<pb::TensorProto::DataType>(t));
  return "<unknown data type " + std::to_string(t) + ">";
}

namespace {

// Copies count typed values into the tensor bytes, converting each to the element type.
template <typename Dst, typename Field, typename Convert>
void fill_from_field(std::vector<uint8_t>& bytes, const Field& field, Convert convert) {
  Dst* out = reinterpret_cast<Dst*>(bytes.data());
  for (int i = 0; i < field.size(); ++i) out[i] = convert(field.Get(i));
}

// The number of values in the typed field that holds this element type.
int typed_field_size(const pb::TensorProto& p, DType d) {
  switch (d) {
    case DType::F32: return p.float_data_size();
    case DType::F64: return p.double_data_size();
    case DType::I64: return p.int64_data_size();
    default: return p.int32_data_size();  // int8/16/32, uint8, bool, float16 and bfloat16 bits
  }
}

}  // namespace

Tensor tensor_from_proto(const pb::TensorProto& p, const std::string& base_dir,
                         const std::string& what) {
  std::optional<DType> dtype = dtype_from_onnx(p.data_type());
  if (!dtype) {
    KILN_CHECK(p.data_type() != pb::TensorProto::UNDEFINED && pb::TensorProto::DataType_IsValid(p.data_type()),
               ValueError, what, ": invalid data type ", p.data_type());
    KILN_THROW(NotImplementedError, what, ": element type ", onnx_type_name(p.data_type()),
               " is not supported by kiln (it has float16/bfloat16/float32/float64, int8..int64, "
               "uint8 and bool)");
  }
  KILN_CHECK(!p.has_segment(), NotImplementedError, what, ": segmented tensors are not supported");
  Shape shape;
  int64_t numel = 1;
  for (int64_t d : p.dims()) {
    KILN_CHECK(d >= 0, ValueError, what, ": negative dimension ", d);
    shape.push_back(d);
    KILN_CHECK(!__builtin_mul_overflow(numel, d, &numel), ValueError, what,
               ": the dimensions overflow 64 bits");
  }
  const uint64_t esize = element_size(*dtype);
  KILN_CHECK(numel == 0 || uint64_t(numel) <= std::numeric_limits<uint64_t>::max() / esize / 2,
             ValueError, what, ": too many elements (", numel, ")");
  const uint64_t nbytes = uint64_t(numel) * esize;

  std::vector<uint8_t> bytes;
  if (p.data_location() == pb::TensorProto::EXTERNAL) {
    bytes = read_external_data(p, base_dir, nbytes, what);
  } else if (p.has_raw_data()) {
    KILN_CHECK(p.raw_data().size() == nbytes, ValueError, what, ": raw_data holds ",
               p.raw_data().size(), " bytes but shape ", shape_str(shape), " of ",
               onnx_type_name(p.data_type()), " needs ", nbytes);
    bytes.assign(p.raw_data().begin(), p.raw_data().end());
  } else {
    const int count = typed_field_size(p, *dtype);
    KILN_CHECK(uint64_t(count) == uint64_t(numel), ValueError, what, ": the data field holds ",
               count, " values but shape ", shape_str(shape), " has ", numel, " elements");
    bytes.resize(nbytes);
    switch (*dtype) {
      case DType::F32: fill_from_field<float>(bytes, p.float_data(), [](float v) { return v; }); break;
      case DType::F64: fill_from_field<double>(bytes, p.double_data(), [](double v) { return v; }); break;
      case DType::I64: fill_from_field<int64_t>(bytes, p.int64_data(), [](int64_t v) { return v; }); break;
      case DType::I32: fill_from_field<int32_t>(bytes, p.int32_data(), [](int32_t v) { return v; }); break;
      case DType::I16: fill_from_field<int16_t>(bytes, p.int32_data(), [](int32_t v) { return int16_t(v); }); break;
      case DType::I8: fill_from_field<int8_t>(bytes, p.int32_data(), [](int32_t v) { return int8_t(v); }); break;
      case DType::U8: fill_from_field<uint8_t>(bytes, p.int32_data(), [](int32_t v) { return uint8_t(v); }); break;
      case DType::Bool: fill_from_field<uint8_t>(bytes, p.int32_data(), [](int32_t v) { return uint8_t(v != 0); }); break;
      // 16-bit floats travel as their bit patterns in int32_data.
      case DType::F16:
      case DType::BF16: fill_from_field<uint16_t>(bytes, p.int32_data(), [](int32_t v) { return uint16_t(v); }); break;
      case DType::C64:
      case DType::C128:  // dtype_from_onnx maps no ONNX type to them
        KILN_THROW(ValueError, what, ": complex initializers are not supported");
    }
  }
  if (*dtype == DType::Bool) {
    for (auto& b : bytes) b = b != 0;  // raw bools other than 0/1 are normalised
  }
  return from_blob_copy(bytes.data(), shape, *dtype, Device(DeviceType::CPU, 0));
}

Tensor parse_tensor(const void* data, size_t size, const std::string& base_dir,
                    const std::string& name) {
  KILN_CHECK(size <= size_t(std::numeric_limits<int>::max()), ValueError, "tensor file ",
             quoted(name), " is ", size, " bytes; protobuf messages are limited to 2 GiB");
  pb::TensorProto proto;
  KILN_CHECK(proto.ParseFromArray(data, int(size)), ValueError, "tensor file ", quoted(name),
             " is not a valid serialized ONNX TensorProto");
  return tensor_from_proto(proto, base_dir, "tensor " + quoted(name));
}

Tensor read_tensor_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  KILN_CHECK(in.good(), ValueError, "cannot open tensor file ", quoted(path, 1024));
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string bytes = ss.str();
  std::string dir = path.substr(0, path.find_last_of('/') == std::string::npos ? 0 : path.find_last_of('/'));
  return parse_tensor(bytes.data(), bytes.size(), dir.empty() ? "." : dir, path);
}

}  // namespace kiln::onnx

namespace kiln::onnx {

std::vector<Tensor> parse_sequence(const void* data, size_t size, const std::string& name) {
  KILN_CHECK(size <= size_t(std::numeric_limits<int>::max()), ValueError, "sequence file ",
             quoted(name), " is ", size, " bytes; protobuf messages are limited to 2 GiB");
  pb::SequenceProto proto;
  KILN_CHECK(proto.ParseFromArray(data, int(size)), ValueError, "sequence file ", quoted(name),
             " is not a valid serialized ONNX SequenceProto");
  KILN_CHECK(proto.elem_type() == pb::SequenceProto::TENSOR ||
                 (proto.elem_type() == pb::SequenceProto::UNDEFINED && proto.sequence_values_size() == 0 &&
                  proto.map_values_size() == 0 && proto.optional_values_size() == 0),
             NotImplementedError, "sequence file ", quoted(name),
             " holds sequences, maps or optionals; kiln reads sequences of tensors only");
  std::vector<Tensor> items;
  for (int i = 0; i < proto.tensor_values_size(); ++i) {
    items.push_back(tensor_from_proto(proto.tensor_values(i), "",
                                      "element " + std::to_string(i) + " of " + quoted(name)));
  }
  return items;
}

std::vector<Tensor> read_sequence_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  KILN_CHECK(in.good(), ValueError, "cannot open sequence file ", quoted(path, 1024));
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string bytes = ss.str();
  return parse_sequence(bytes.data(), bytes.size(), path);
}

Value parse_optional(const void* data, size_t size, const std::string& name) {
  KILN_CHECK(size <= size_t(std::numeric_limits<int>::max()), ValueError, "optional file ",
             quoted(name), " is ", size, " bytes; protobuf messages are limited to 2 GiB");
  pb::OptionalProto proto;
  KILN_CHECK(proto.ParseFromArray(data, int(size)), ValueError, "optional file ", quoted(name),
             " is not a valid serialized ONNX OptionalProto");
  if (proto.has_tensor_value()) return tensor_from_proto(proto.tensor_value(), "", "the tensor of " + quoted(name));
  if (proto.has_sequence_value()) {
    std::string bytes;
    proto.sequence_value().SerializeToString(&bytes);
    return Value::make_sequence(parse_sequence(bytes.data(), bytes.size(), name));
  }
  KILN_CHECK(!proto.has_map_value() && !proto.has_optional_value() && !proto.has_sparse_tensor_value(),
             NotImplementedError, "optional file ", quoted(name), " holds a map, optional or sparse tensor");
  return Value::make_none();
}

Value read_optional_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  KILN_CHECK(in.good(), ValueError, "cannot open optional file ", quoted(path, 1024));
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string bytes = ss.str();
  return parse_optional(bytes.data(), bytes.size(), path);
}

}  // namespace kiln::onnx
