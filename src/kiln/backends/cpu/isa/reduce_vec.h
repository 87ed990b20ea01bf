#pragma once
// Vectorised reductions over contiguous arrays, compiled once per ISA level (baseline,
// AVX2, AVX-512) from one portable body whose fixed-width lane loops the compiler turns into
// vector code, chosen once at start. Two shapes of reduction:
//   - a run: the reduced elements of one output are contiguous (sum over the last dim);
//   - rows: the output is a contiguous row and the reduced elements are whole input rows
//     added into it (sum over dim 0 of a [R, C] tensor), so nothing is read with a stride.
// Sums add float32 lanes over blocks of 256 elements (runs) or 16 rows, then carry
// each block's partial sums in double: as fast as plain float accumulation and more exact
// than PyTorch's. max/min propagate NaN as the scalar kernels do.
#include <cstdint>

namespace kiln::cpu {

struct VecReduce {
  double (*sum_f32)(const float* x, int64_t n) = nullptr;
  double (*sum_bf16)(const uint16_t* x, int64_t n) = nullptr;
  // The product in double (32 independent lane products, combined in a fixed order).
  double (*prod_f32)(const float* x, int64_t n) = nullptr;
  double (*prod_bf16)(const uint16_t* x, int64_t n) = nullptr;
  // Four runs of n each (x[0..3]): out[r] is the double product of run r in order from 1.0,
  // the generic loop's bits (for runs too short for prod_*'s lanes).
  void (*prod_four_runs_f32)(const float* const* x, int64_t n, double* out) = nullptr;
  void (*prod_four_runs_bf16)(const uint16_t* const* x, int64_t n, double* out) = nullptr;
  // sum of (x - mean)^2, for var/std's second pass.
  double (*sum_sq_dev_f32)(const float* x, int64_t n, double mean) = nullptr;
  // Four runs of n < 64 each (layer_norm / rms_norm rows): mean[r] = the double sum of run r
  // (sum_f32's bits) / n when centred, else 0; m2[r] = the double sum of (x - mean[r])^2 in
  // order, / n.
  void (*norm_stats_four_runs_f32)(const float* const* x, int64_t n, bool centred,
                                   double* mean, double* m2) = nullptr;
  double (*sum_sq_dev_bf16)(const uint16_t* x, int64_t n, double mean) = nullptr;
  float (*max_f32)(const float* x, int64_t n) = nullptr;  // n >= 1
  float (*min_f32)(const float* x, int64_t n) = nullptr;
  float (*max_bf16)(const uint16_t* x, int64_t n) = nullptr;
  float (*min_bf16)(const uint16_t* x, int64_t n) = nullptr;
  // Several runs at once (count <= kMaxRuns, each n[k] >= 1 for max/min): out[k] is what
  // the single-run function gives for x[k], n[k], bit for bit; reading the runs side by
  // side keeps several memory streams in flight.
  void (*sum_runs_f32)(const float* const* x, const int64_t* n, int count, double* out) = nullptr;
  void (*sum_runs_bf16)(const uint16_t* const* x, const int64_t* n, int count,
                        double* out) = nullptr;
  void (*max_runs_f32)(const float* const* x, const int64_t* n, int count, float* out) = nullptr;
  void (*min_runs_f32)(const float* const* x, const int64_t* n, int count, float* out) = nullptr;
  void (*max_runs_bf16)(const uint16_t* const* x, const int64_t* n, int count,
                        float* out) = nullptr;
  void (*min_runs_bf16)(const uint16_t* const* x, const int64_t* n, int count,
                        float* out) = nullptr;
  // count runs of n elements each (n >= 1), run k at x + k * stride: out[k] is what the
  // single-run function gives for it, bit for bit, without a call per run (many short runs:
  // the channels of a channels-last tensor, the last dim of [4096, 8]).
  void (*sum_strided_runs_f32)(const float* x, int64_t stride, int64_t n, int64_t count,
                               double* out) = nullptr;
  void (*sum_strided_runs_bf16)(const uint16_t* x, int64_t stride, int64_t n, int64_t count,
                                double* out) = nullptr;
  void (*max_strided_runs_f32)(const float* x, int64_t stride, int64_t n, int64_t count,
                               float* out) = nullptr;
  void (*min_strided_runs_f32)(const float* x, int64_t stride, int64_t n, int64_t count,
                               float* out) = nullptr;
  void (*max_strided_runs_bf16)(const uint16_t* x, int64_t stride, int64_t n, int64_t count,
                                float* out) = nullptr;
  void (*min_strided_runs_bf16)(const uint16_t* x, int64_t stride, int64_t n, int64_t count,
                                float* out) = nullptr;
  // Rows: for j < n, acc[j] (+)= the sum / max / min over r < rows of base[offs[r] + j].
  // acc starts as the caller's running value (0 for sums, the first row for max/min).
  void (*sum_rows_f32)(double* acc, const float* base, const int64_t* offs, int64_t rows,
                       int64_t n) = nullptr;
  void (*sum_rows_bf16)(double* acc, const uint16_t* base, const int64_t* offs, int64_t rows,
                        int64_t n) = nullptr;
  void (*max_rows_f32)(float* acc, const float* base, const int64_t* offs, int64_t rows,
                       int64_t n) = nullptr;
  void (*min_rows_f32)(float* acc, const float* base, const int64_t* offs, int64_t rows,
                       int64_t n) = nullptr;
  void (*max_rows_bf16)(float* acc, const uint16_t* base, const int64_t* offs, int64_t rows,
                        int64_t n) = nullptr;
  void (*min_rows_bf16)(float* acc, const uint16_t* base, const int64_t* offs, int64_t rows,
                        int64_t n) = nullptr;
  // Columns of a contiguous [n / period, period] block (period divides 16): out[j] += the
  // sum of column j.
  void (*sum_periodic_f32)(const float* x, int64_t n, int64_t period, double* out) = nullptr;
  void (*sum_periodic_bf16)(const uint16_t* x, int64_t n, int64_t period,
                            double* out) = nullptr;
  // Average-pooling windows of a channels-last input: out[c] = float(s / divisor) for c < n,
  // s the double sum of x[offs[t] + c] over the taps t in order: the planar kernel's sums and
  // rounding, bit for bit, computed for eight channels per vector.
  void (*window_mean_f32)(const float* x, const int64_t* offs, int64_t taps, int64_t n,
                          double divisor, float* out) = nullptr;
  void (*window_mean_bf16)(const uint16_t* x, const int64_t* offs, int64_t taps, int64_t n,
                           double divisor, float* out) = nullptr;
  // float16 forms of the entries above (input: float16 bits), the same lanes and order on
  // the exactly widened values, so each result equals the float32 entry's on the widened
  // input bit for bit. Null where the level or the CPU lacks F16C (decision 0067).
  double (*sum_f16)(const uint16_t* x, int64_t n) = nullptr;
  double (*sum_sq_dev_f16)(const uint16_t* x, int64_t n, double mean) = nullptr;
  float (*max_f16)(const uint16_t* x, int64_t n) = nullptr;
  float (*min_f16)(const uint16_t* x, int64_t n) = nullptr;
  void (*sum_runs_f16)(const uint16_t* const* x, const int64_t* n, int count,
                       double* out) = nullptr;
  void (*max_runs_f16)(const uint16_t* const* x, const int64_t* n, int count,
                       float* out) = nullptr;
  void (*min_runs_f16)(const uint16_t* const* x, const int64_t* n, int count,
                       float* out) = nullptr;
  void (*sum_strided_runs_f16)(const uint16_t* x, int64_t stride, int64_t n, int64_t count,
                               double* out) = nullptr;
  void (*max_strided_runs_f16)(const uint16_t* x, int64_t stride, int64_t n, int64_t count,
                               float* out) = nullptr;
  void (*min_strided_runs_f16)(const uint16_t* x, int64_t stride, int64_t n, int64_t count,
                               float* out) = nullptr;
  void (*sum_rows_f16)(double* acc, const uint16_t* base, const int64_t* offs, int64_t rows,
                       int64_t n) = nullptr;
  void (*max_rows_f16)(float* acc, const uint16_t* base, const int64_t* offs, int64_t rows,
                       int64_t n) = nullptr;
  void (*min_rows_f16)(float* acc, const uint16_t* base, const int64_t* offs, int64_t rows,
                       int64_t n) = nullptr;
  void (*sum_periodic_f16)(const uint16_t* x, int64_t n, int64_t period,
                           double* out) = nullptr;
  // The longest row the rows functions take (their float partials live on the stack).
  static constexpr int64_t kMaxRow = 1024;
  // Rows the rows functions sum in float before carrying in double (groups start at the
  // first row passed).
  static constexpr int64_t kRowGroup = 16;
  // The most runs the *_runs functions take.
  static constexpr int kMaxRuns = 4;
};

const VecReduce& reduce_vec_baseline();
const VecReduce& reduce_vec_avx2();
const VecReduce& reduce_vec_avx512();

// The table for the current ISA level (every entry but the float16 ones is set at every level).
const VecReduce& reduce_vec();

// Whether max / min of long runs prefetch each block ahead of its reads: on Intel, where it
// lifted max of 64M floats from 0.77-0.83x to 0.84-0.96x of a copy's bandwidth (decision
// 0117); not elsewhere: on AMD Zen 4 the same prefetch held max at 0.62-0.72x against
// 0.70-0.82x without (seven alternated pairs of runs, decision 0150).
bool prefetch_extremum_blocks();

}  // namespace kiln::cpu
