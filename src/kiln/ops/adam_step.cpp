// adam_step_: the op behind the fused Adam / AdamW update (include/kiln/ops/adam_step.h). Its
// three outputs are the parameter and the two moments themselves (written in place through
// call_op_out, which bumps their version counters: a Linear's packed copy of a weight is
// rebuilt after the step).
#include "kiln/ops/adam_step.h"

#include "kiln/dispatch/dispatcher.h"
#include "kiln/ops/op_helpers.h"

namespace kiln {

bool adam_step_supported(const Tensor& param, const Tensor& grad, const Tensor& exp_avg,
                         const Tensor& exp_avg_sq) {
  for (const Tensor* t : {&param, &grad, &exp_avg, &exp_avg_sq})
    if (!t->defined() || t->dtype() != DType::F32 || !t->is_contiguous() ||
        t->shape() != param.shape() || t->device() != param.device())
      return false;
  const DeviceType d = param.device().type;
  return d == DeviceType::CPU || d == DeviceType::Testing || d == DeviceType::XPU;
}

void adam_step_(Tensor& param, const Tensor& grad, Tensor& exp_avg, Tensor& exp_avg_sq,
                const AdamStepScalars& s) {
  KILN_CHECK(adam_step_supported(param, grad, exp_avg, exp_avg_sq), ValueError,
             "adam_step_: expected contiguous float32 parameter, gradient and moments of one "
             "shape on the cpu, xpu or testing device, got ",
             dtype_name(param.dtype()), " ", shape_str(param.shape()), " on ",
             param.device().str(), " with a ", dtype_name(grad.dtype()), " ",
             shape_str(grad.shape()), " gradient");
  call_op_out(KILN_OP("adam_step_"), {param, grad, exp_avg, exp_avg_sq},
              {s.decay, s.lerp_weight, s.beta2, s.one_minus_beta2, s.bias_correction2_sqrt,
               s.eps, s.neg_step_size, s.maximize},
              {param, exp_avg, exp_avg_sq});
}

namespace ops {
namespace {
std::vector<TensorMeta> adam_step_meta(const OpCall& c) {
  return {{c.inputs[0].shape(), c.inputs[0].dtype()},
          {c.inputs[2].shape(), c.inputs[2].dtype()},
          {c.inputs[3].shape(), c.inputs[3].dtype()}};
}
}  // namespace

void register_adam_step_op() {
  register_op("adam_step_",
              "adam_step_(Tensor param, Tensor grad, Tensor exp_avg, Tensor exp_avg_sq, "
              "float decay, float lerp_weight, float beta2, float one_minus_beta2, "
              "float bias_correction2_sqrt, float eps, float neg_step_size, bool maximize) -> "
              "(Tensor, Tensor, Tensor)",
              adam_step_meta);
}
}  // namespace ops

}  // namespace kiln
