#pragma once
// A chain of float32 elementwise steps run as one pass over a tensor: what an imported
// network's activation blocks (a hard swish written as Add, Clip, Mul, Div; batch norm at
// inference; a learnable scale and shift) cost as one read and one write instead of a pass,
// an allocation and a dispatch per step. Each step rounds to float32 exactly as the op it
// stands for, through the same vector functions, so the result equals the op sequence bit
// for bit (decision 0056).
#include <cstdint>
#include <vector>

#include "kiln/tensor/tensor.h"

namespace kiln {

enum class PointwiseOp : int64_t {
  Add, Sub, Mul, Div, Max, Min,  // binary: r[dst] = r[a] op b (b op r[a] when reversed)
  Relu, Neg, Abs, Clamp,         // unary on r[a]; Clamp's bounds are scalars lo and hi
  Erf, Sqrt,  // unary, through the eager ops' vector functions, whose lanes are independent
  // (exp, sigmoid and tanh are not taken: their vector code branches on all lanes at once, so
  // a value's result depends on its neighbours and the program's blocks would change it)
};

// Where a binary step's second operand comes from.
enum class PointwiseOperand : int64_t {
  Register,  // r[b]
  Scalar,    // scalars[b]
  Channel,   // channels[b][c] for elements of channel c (dim 1 of the input, or its last
             // dim when the program's vectors run along it: a bias row)
};

struct PointwiseStep {
  PointwiseOp op = PointwiseOp::Add;
  int64_t dst = 0, a = 0;
  PointwiseOperand kind = PointwiseOperand::Scalar;
  int64_t b = 0;          // register or constant index (Clamp: scalars[b] is lo, [b + 1] hi)
  bool reversed = false;  // b op r[a]
};

// The steps over registers: r[0] holds the input; the last step's dst is the result.
struct PointwiseProgram {
  std::vector<PointwiseStep> steps;
  int64_t registers = 1;
  std::vector<float> scalars;
  std::vector<std::vector<float>> channels;  // per-channel vectors, all of one length C
  bool last_dim = false;  // the vectors run along the input's last dim instead of dim 1
};

// Whether pointwise_program takes x: a float32 tensor on the CPU or an xpu device, with x.size(1) (x.size(-1)
// when last_dim) equal to the channel vectors' length when there are any. Otherwise
// run_pointwise_steps gives the same values through ordinary ops (any device).
bool pointwise_program_supported(const Tensor& x, const PointwiseProgram& program);

// The program over x in one pass (raises unless pointwise_program_supported).
Tensor pointwise_program(const Tensor& x, const PointwiseProgram& program);

// The same steps as ordinary ops (add, mul, clamp, ...), one at a time, on x's device.
Tensor run_pointwise_steps(const Tensor& x, const PointwiseProgram& program);

// Checks that the steps name registers below `registers`, constants that exist and one
// channel length, and that the program has a step (ValueError naming the step otherwise).
void check_pointwise_program(const PointwiseProgram& program);

// The program as the op's one int[] attribute (float constants by their bits), and back.
std::vector<int64_t> encode_pointwise_program(const PointwiseProgram& program);
PointwiseProgram decode_pointwise_program(const std::vector<int64_t>& code);

}  // namespace kiln
