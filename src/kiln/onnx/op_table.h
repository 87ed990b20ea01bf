#pragma once
// The operator table: one entry per ONNX operator type, registered by family in ops_*.cpp.
// Default-domain operators are keyed by their type ("Conv"), others by "domain:Type".
#include <map>
#include <string>

#include "kiln/onnx/op_context.h"

namespace kiln::onnx {

class OpTable {
 public:
  void add(const std::string& op_type, OpFunction fn) { ops_[op_type] = fn; }
  OpFunction find(const std::string& op_type) const {
    auto it = ops_.find(op_type);
    return it == ops_.end() ? nullptr : it->second;
  }
  const std::map<std::string, OpFunction>& all() const { return ops_; }

 private:
  std::map<std::string, OpFunction> ops_;
};

const OpTable& op_table();

void register_math_ops(OpTable& table);
void register_reduction_ops(OpTable& table);
void register_shape_ops(OpTable& table);
void register_nn_ops(OpTable& table);
void register_conv_pool_ops(OpTable& table);
void register_loss_ops(OpTable& table);
void register_resize_ops(OpTable& table);
void register_quant_ops(OpTable& table);
void register_control_ops(OpTable& table);
void register_sequence_ops(OpTable& table);
void register_recurrent_ops(OpTable& table);
void register_signal_ops(OpTable& table);
void register_detection_ops(OpTable& table);
void register_grid_sample_ops(OpTable& table);
void register_unique_reverse_ops(OpTable& table);
void register_linalg_ops(OpTable& table);
void register_text_ops(OpTable& table);
void register_training_ops(OpTable& table);

}  // namespace kiln::onnx
