// CPU kernels of nll_loss and nll_loss_backward (kiln/ops/nll_loss.h): one pass over the N * D
// targets, each reading (or writing) the one log-probability of its class. Sums are taken in
// double over a fixed split into pieces, added in order, so a result does not depend on the
// number of threads.
#include <cstring>
#include <vector>

#include "class_targets_check.h"
#include "kiln/core/convert.h"
#include "kiln/core/error.h"
#include "kiln/dispatch/registry.h"
#include "kiln/ops/nll_loss.h"
#include "kiln/tensor/strided_loop.h"

namespace kiln::cpu {
namespace {

using ops::NllReduction;

// The targets of one call (inputs[1]), checked, with their class weights (inputs[2]).
template <typename T>
struct ClassTargets {
  const int64_t* index;
  int64_t ignore_index;
  const T* weight;  // null: every class weighs 1
  bool ignored(int64_t i) const { return index[i] == ignore_index; }
  double weight_of(int64_t i) const {  // sample i's class weight (i not ignored)
    return weight ? convert_value<double>(weight[index[i]]) : 1.0;
  }
};

template <typename T>
ClassTargets<T> class_targets(const OpCall& call, int64_t n, int64_t classes,
                              int64_t ignore_index, const char* op) {
  const int64_t* index = static_cast<const int64_t*>(call.inputs[1].raw_data());
  check_class_targets(index, n, classes, ignore_index, op);
  const Tensor& w = call.inputs[2];
  return {index, ignore_index, w.defined() ? static_cast<const T*>(w.raw_data()) : nullptr};
}

template <typename T>
double read_double(const Tensor& t) {
  return convert_value<double>(*static_cast<const T*>(t.raw_data()));
}

// inputs {input [N, C, D] any strides, target [N, D] int64 contiguous, weight? [C] contiguous},
// attrs {reduction, ignore_index}; outs {loss, total_weight}.
template <typename T>
void nll_loss_kernel(OpCall& call) {
  const Tensor& x = call.inputs[0];
  const int64_t N = x.size(0), C = x.size(1), D = x.size(2), n = N * D;
  const auto reduction = NllReduction(call.int_attr(0));
  const ClassTargets<T> targets = class_targets<T>(call, n, C, call.int_attr(1), "nll_loss");
  const T* xp = static_cast<const T*>(x.raw_data());
  const int64_t s0 = x.stride(0), s1 = x.stride(1), s2 = x.stride(2);
  // Loss and weight of sample i (0 and 0 when its target is ignored). Without extra dims
  // (D == 1, input [N, C]) no division splits i: a 64-bit division per target was most of
  // nll_loss of [4096, 8] float32 (14.6 us, torch 9.7).
  auto term = [&](int64_t i, double& w) {
    if (targets.ignored(i)) {
      w = 0.0;
      return 0.0;
    }
    w = targets.weight_of(i);
    const int64_t at = D == 1 ? i * s0 : (i / D) * s0 + (i % D) * s2;
    return -w * convert_value<double>(xp[at + targets.index[i] * s1]);
  };
  T* loss = static_cast<T*>(call.outs[0].raw_data());
  T* total_weight = static_cast<T*>(call.outs[1].raw_data());
  constexpr int64_t kPieces = 64;
  double loss_sums[kPieces] = {}, weight_sums[kPieces] = {};  // on the stack: no allocation
  auto piece = [&](int64_t p) {
    double ls = 0.0, ws = 0.0;
    for (int64_t i = n * p / kPieces; i < n * (p + 1) / kPieces; ++i) {
      double w;
      const double l = term(i, w);
      if (reduction == NllReduction::None) loss[i] = convert_value<T>(l);
      ls += l;
      ws += w;
    }
    loss_sums[p] = ls;
    weight_sums[p] = ws;
  };
  if (n >= detail::kParallelElements) {
    detail::parallel_chunks(kPieces, piece);
  } else {
    for (int64_t p = 0; p < kPieces; ++p) piece(p);
  }
  double ls = 0.0, ws = 0.0;
  for (int64_t p = 0; p < kPieces; ++p) {
    ls += loss_sums[p];
    ws += weight_sums[p];
  }
  *total_weight = convert_value<T>(ws);
  if (reduction == NllReduction::Sum) *loss = convert_value<T>(ls);
  if (reduction == NllReduction::Mean) *loss = convert_value<T>(ls / ws);  // 0 / 0: nan
}

// inputs {grad_output (the loss's shape, contiguous), target [N, D], weight? [C],
// total_weight []}, attrs {classes, reduction, ignore_index}; outs {grad_input [N, C, D]}.
template <typename T>
void nll_loss_backward_kernel(OpCall& call) {
  const Tensor& gy = call.inputs[0];
  const Tensor& gx = call.outs[0];
  const int64_t N = gx.size(0), C = gx.size(1), D = gx.size(2), n = N * D;
  const auto reduction = NllReduction(call.int_attr(1));
  const ClassTargets<T> targets =
      class_targets<T>(call, n, C, call.int_attr(2), "nll_loss_backward");
  const T* gyp = static_cast<const T*>(gy.raw_data());
  T* gxp = static_cast<T*>(gx.raw_data());
  if (gx.numel() == 0) return;
  const size_t row_bytes = size_t(C * D) * sizeof(T);
  double scale = 1.0;  // of the one grad_output element of a reduced loss
  if (reduction != NllReduction::None) {
    scale = convert_value<double>(gyp[0]);
    if (reduction == NllReduction::Mean) {
      const Tensor& tw = call.inputs[3];
      scale /= KILN_DISPATCH_FLOAT(tw.dtype(), "nll_loss_backward",
                                   [&]<typename W>() { return read_double<W>(tw); });
    }
  }
  // By samples: each clears its own [C, D] block, then writes its D gradients into it.
  auto sample = [&](int64_t s) {
    std::memset(static_cast<void*>(gxp + s * C * D), 0, row_bytes);  // zero bits are +0
    for (int64_t d = 0; d < D; ++d) {
      const int64_t i = s * D + d;
      if (targets.ignored(i)) continue;
      const double g = reduction == NllReduction::None ? convert_value<double>(gyp[i]) : scale;
      gxp[(s * C + targets.index[i]) * D + d] = convert_value<T>(-targets.weight_of(i) * g);
    }
  };
  if (gx.numel() >= detail::kParallelElements && N > 1) {
    detail::parallel_chunks(N, sample);
  } else {
    for (int64_t s = 0; s < N; ++s) sample(s);
  }
}

void nll_loss_dispatch(OpCall& call) {
  KILN_DISPATCH_FLOAT(call.inputs[0].dtype(), "nll_loss",
                      [&]<typename T>() { nll_loss_kernel<T>(call); });
}
void nll_loss_backward_dispatch(OpCall& call) {
  KILN_DISPATCH_FLOAT(call.inputs[0].dtype(), "nll_loss_backward",
                      [&]<typename T>() { nll_loss_backward_kernel<T>(call); });
}

}  // namespace

void register_nll_loss_kernels() {
  register_kernel("nll_loss", DeviceType::CPU, nll_loss_dispatch, kFloatDTypes);
  register_kernel("nll_loss_backward", DeviceType::CPU, nll_loss_backward_dispatch,
                  kFloatDTypes);
}

}  // namespace kiln::cpu
