#pragma once
// The CPU thread pool: one OpenMP team shared by kiln's kernels (and by oneDNN, which uses
// the same OpenMP runtime), as torch.set_num_threads / torch.get_num_threads.
namespace kiln {

// Threads used by parallel CPU kernels from now on (at least 1; ValueError otherwise). As
// OpenMP's setting it applies to ops started from the calling thread (the thread that runs
// the model); worker threads of asynchronous devices keep the default (all cores).
void set_num_threads(int threads);
int get_num_threads();

// torch.set_flush_denormal: subnormal float results flush to zero and subnormal inputs read as
// zero (x86 MXCSR FTZ and DAZ) on the calling thread and on the OpenMP team's threads, or
// back to IEEE behaviour. False (nothing changed) where the CPU has no DAZ (before SSE3).
// Products of tiny values then stop taking microcode assists (often 100x slower per op).
bool set_flush_denormal(bool on);

// torch.set_num_interop_threads / get_num_interop_threads: kiln runs independent ops on the
// calling thread (no inter-op pool), so the value is recorded and reported only.
void set_num_interop_threads(int threads);
int get_num_interop_threads();

}  // namespace kiln
