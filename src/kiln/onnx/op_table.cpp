#include "kiln/onnx/op_table.h"

#include "kiln/onnx/operators.h"

namespace kiln::onnx {

const OpTable& op_table() {
  static const OpTable table = [] {
    OpTable t;
    register_math_ops(t);
    register_reduction_ops(t);
    register_shape_ops(t);
    register_nn_ops(t);
    register_conv_pool_ops(t);
    register_loss_ops(t);
    register_resize_ops(t);
    register_quant_ops(t);
    register_control_ops(t);
    register_sequence_ops(t);
    register_recurrent_ops(t);
    register_signal_ops(t);
    register_detection_ops(t);
    register_grid_sample_ops(t);
    register_unique_reverse_ops(t);
    register_linalg_ops(t);
    register_text_ops(t);
    register_training_ops(t);
    return t;
  }();
  return table;
}

bool is_supported_operator(const std::string& op_type) { return op_table().find(op_type) != nullptr; }

std::vector<std::string> supported_operators() {
  std::vector<std::string> names;
  for (const auto& [name, fn] : op_table().all()) names.push_back(name);
  return names;
}

}  // namespace kiln::onnx
