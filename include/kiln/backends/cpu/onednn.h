#pragma once
// Whether kiln's CPU backend hands work to oneDNN (tall matrix products, Linear with packed
// weights, int8 products, convolution: decisions 0016, 0017, 0019, 0022), as
// torch.backends.mkldnn: available when kiln was built with libdnnl, in use unless switched
// off. KILN_ONEDNN=0 switches it off at start; set_onednn_enabled changes it at run time (each
// op decides when it runs, so the next op sees the change). Switched off, every product and
// convolution runs kiln's own kernels.
#include <cstddef>

namespace kiln::cpu {

bool onednn_available();           // built with oneDNN
bool onednn_enabled();             // available and switched on
void set_onednn_enabled(bool on);  // no effect on a build without oneDNN

// Whether float32 3x3 stride-1 convolutions big enough to gain may run oneDNN's Winograd
// kernels (decision 0030: 1.3-2.7x faster on ResNet-50's layers, results within a few float32
// ulps of the output's scale instead of one or two), as torch.backends.cudnn.allow_tf32 trades
// exactness for speed. On unless KILN_WINOGRAD=0 at start.
bool onednn_winograd_allowed();
void set_onednn_winograd_allowed(bool on);

// The copies of weights kept in oneDNN's blocked layouts (Linear and convolution weights, a
// matmul operand used again: decisions 0016, 0019, 0031), one per weight tensor and layout;
// the copies of freed weights are dropped at the next packing. How many there are now, and
// dropping them all (memory pressure; they are made again on next use). Always 0 without
// oneDNN.
size_t onednn_packed_weight_count();
void onednn_clear_packed_weights();

// How many oneDNN plans (a primitive, JIT-compiled when made) kiln has made since it started.
// A shape's first call makes one, later calls with the same shape and thread count
// (set_num_threads) reuse it. Always 0 without oneDNN.
size_t onednn_plans_made();

}  // namespace kiln::cpu
