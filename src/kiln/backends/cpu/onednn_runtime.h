#pragma once
// What kiln's oneDNN paths (onednn_conv.cpp, onednn_matmul.cpp) share: the engine, the
// KILN_ONEDNN switch and the ISA cap. The oneDNN types appear only when kiln is built with
// it (KILN_HAVE_DNNL); onednn_apply_isa_cap is always declared (`kiln bench` calls it).
#ifdef KILN_HAVE_DNNL
#include <oneapi/dnnl/dnnl.hpp>
#endif

namespace kiln::cpu {

// Caps oneDNN's instruction set at kiln's ISA level (KILN_CPU_ISA), once, before oneDNN
// creates its first primitive. A no-op without oneDNN.
void onednn_apply_isa_cap();

#ifdef KILN_HAVE_DNNL
// The CPU engine, created once after the ISA cap.
dnnl::engine& onednn_engine();
// False when KILN_ONEDNN=0: every product and convolution then runs kiln's own kernels.
bool onednn_enabled();
#endif

}  // namespace kiln::cpu
