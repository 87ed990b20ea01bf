#pragma once
// The CPU thread pool: one OpenMP team shared by kiln's kernels (and by oneDNN, which uses
// the same OpenMP runtime), as torch.set_num_threads / torch.get_num_threads.
namespace kiln {

// Threads used by parallel CPU kernels from now on (at least 1; ValueError otherwise). As
// OpenMP's setting it applies to ops started from the calling thread (the thread that runs
// the model); worker threads of asynchronous devices keep the default (all cores).
void set_num_threads(int threads);
int get_num_threads();

}  // namespace kiln
