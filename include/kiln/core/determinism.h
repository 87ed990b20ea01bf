#pragma once
// torch.use_deterministic_algorithms: when on, kernels whose results could depend on the
// order of concurrent writes take a deterministic path (on xpu: index_put and scatter with
// repeated indices run the CPU kernel through host memory, where the last write wins).
// Every other kiln kernel is deterministic already (sums in a fixed order, no float atomics).
namespace kiln {

bool deterministic_algorithms();
void set_deterministic_algorithms(bool on);

}  // namespace kiln
