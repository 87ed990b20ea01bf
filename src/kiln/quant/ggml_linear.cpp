// The ggml_linear op (include/kiln/quant/ggml_linear.h): checks, shape, registration. The CPU
// kernel is backends/cpu/ggml_linear_kernel.cpp.
#include "kiln/quant/ggml_linear.h"

#include "kiln/dispatch/dispatcher.h"
#include "kiln/dispatch/registry.h"
#include "kiln/ops/op_helpers.h"

namespace kiln::quant {

namespace {

std::vector<TensorMeta> ggml_linear_meta(const OpCall& call) {
  const Tensor& x = call.inputs[0];
  Shape shape = x.shape();
  shape.back() = call.inputs[1].size(0);
  return {{shape, DType::F32}};
}

}  // namespace

Tensor ggml_linear(const Tensor& input, const Tensor& weight_blocks, GGMLType type,
                   int64_t in_features, const Tensor& bias) {
  const GGMLTypeInfo* ti = ggml_type_info(uint32_t(type));
  KILN_CHECK(ti != nullptr && ti->quantized, TypeError, "ggml_linear: expected a block-quantised "
             "ggml type (Q4_0, Q8_0, Q4_K, ...), got ", ggml_type_name(uint32_t(type)));
  KILN_CHECK(in_features > 0 && in_features % ti->block_elems == 0, ValueError, "ggml_linear: ",
             ti->name, " rows hold a multiple of ", ti->block_elems, " values, got in_features ",
             in_features);
  KILN_CHECK(weight_blocks.dtype() == DType::U8 && weight_blocks.dim() == 2, TypeError,
             "ggml_linear: expected the weight's raw blocks as a uint8 [out_features, row_bytes] "
             "tensor, got ", dtype_name(weight_blocks.dtype()), " ",
             shape_str(weight_blocks.shape()));
  const int64_t row_bytes = ggml_row_bytes(type, in_features);
  KILN_CHECK(weight_blocks.size(1) == row_bytes, ShapeError, "ggml_linear: a ", ti->name,
             " row of ", in_features, " values takes ", row_bytes, " bytes, but the weight has rows of ",
             weight_blocks.size(1), " bytes");
  KILN_CHECK(input.dim() >= 1 && input.size(input.dim() - 1) == in_features, ShapeError,
             "ggml_linear: expected input [..., ", in_features, "], got ", shape_str(input.shape()));
  KILN_CHECK(is_floating(input.dtype()) && input.dtype() != DType::F64, TypeError,
             "ggml_linear: expected a float32, bfloat16 or float16 input, got ",
             dtype_name(input.dtype()));
  KILN_CHECK(input.device() == weight_blocks.device(), DeviceError,
             "ggml_linear: input on ", input.device().str(), " but weight on ",
             weight_blocks.device().str());
  const int64_t N = weight_blocks.size(0);
  if (bias.defined())
    KILN_CHECK(bias.dim() == 1 && bias.size(0) == N, ShapeError, "ggml_linear: expected bias [",
               N, "], got ", shape_str(bias.shape()));
  Tensor x = input.dtype() == DType::F32 ? input.contiguous() : input.to(DType::F32).contiguous();
  Tensor y = call_op(KILN_OP("ggml_linear"), {x, weight_blocks.contiguous()},
                     {int64_t(type), in_features});
  if (bias.defined()) y = y + bias.to(DType::F32);
  return y;
}

bool ggml_linear_has_kernel(GGMLType type) {
  return type == GGMLType::Q8_0 || type == GGMLType::Q4_0 || type == GGMLType::Q4_K ||
         type == GGMLType::Q5_K || type == GGMLType::Q6_K;
}

}  // namespace kiln::quant

namespace kiln::ops {
void register_ggml_linear_op() {
  register_op("ggml_linear", "ggml_linear(Tensor input, Tensor weight, int type, int in_features) -> Tensor",
              quant::ggml_linear_meta);
}
}  // namespace kiln::ops
