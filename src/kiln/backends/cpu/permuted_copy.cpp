#include "permuted_copy.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "index_loops.h"
#include "isa/data_moves.h"
#include "kiln/tensor/empty.h"
#include "kiln/tensor/copy_bytes.h"
#include "kiln/tensor/strided_loop.h"

namespace kiln::cpu {
namespace {

// Below this many elements the generic loop is as fast and the setup here would show.
constexpr int64_t kMinElements = 4096;

struct Dim {
  int64_t size, dst, src;  // strides in elements
};

// The copy's dimensions in the destination's order (largest destination stride first),
// size-1 dimensions dropped, neighbours merged where both sides are contiguous across them.
std::vector<Dim> coalesced_dims(const Tensor& src, const Tensor& dst) {
  std::vector<Dim> dims;
  for (int64_t i = 0; i < dst.dim(); ++i)
    if (dst.size(i) != 1) dims.push_back({dst.size(i), dst.stride(i), src.stride(i)});
  std::stable_sort(dims.begin(), dims.end(),
                   [](const Dim& a, const Dim& b) { return a.dst > b.dst; });
  std::vector<Dim> merged;
  for (const Dim& d : dims) {
    if (!merged.empty()) {
      Dim& o = merged.back();
      if (o.dst == d.dst * d.size && o.src == d.src * d.size) {
        o = {o.size * d.size, d.dst, d.src};
        continue;
      }
    }
    merged.push_back(d);
  }
  return merged;
}

// [lowest, highest] byte addresses a tensor's elements occupy (strides are non-negative).
std::pair<uintptr_t, uintptr_t> byte_span(const Tensor& t) {
  const auto base = reinterpret_cast<uintptr_t>(t.raw_data());
  int64_t last = 0;
  for (int64_t i = 0; i < t.dim(); ++i) last += (t.size(i) - 1) * t.stride(i);
  return {base, base + uintptr_t((last + 1) * int64_t(t.element_size())) - 1};
}

int64_t count(const std::vector<Dim>& dims) {
  int64_t n = 1;
  for (const Dim& d : dims) n *= d.size;
  return n;
}

// Walks the outer index space in order (last dimension fastest), keeping both offsets, so
// consecutive indices cost additions instead of a division per dimension. next() is inline for
// the step along the last dimension (a call per run took a fifth of a permute's time).
class OuterWalk {
 public:
  OuterWalk(const std::vector<Dim>& dims, int64_t start) : dims_(dims), index_(dims.size()) {
    for (size_t k = dims.size(); k-- > 0;) {
      index_[k] = start % dims[k].size;
      start /= dims[k].size;
      dst += index_[k] * dims[k].dst;
      src += index_[k] * dims[k].src;
    }
    if (!dims.empty()) last_ = dims.back();
    last_index_ = dims.empty() ? 0 : index_.back();
  }
  void next() {
    dst += last_.dst;
    src += last_.src;
    if (++last_index_ < last_.size) return;
    carry();
  }
  int64_t dst = 0, src = 0;

 private:
  // The last dimension wrapped: back to its start, the dimensions before it advanced.
  void carry() {
    dst -= last_.size * last_.dst;
    src -= last_.size * last_.src;
    last_index_ = 0;
    if (dims_.empty()) return;  // a single index: stepping past it changes nothing
    for (size_t k = dims_.size() - 1; k-- > 0;) {
      dst += dims_[k].dst;
      src += dims_[k].src;
      if (++index_[k] < dims_[k].size) return;
      dst -= dims_[k].size * dims_[k].dst;
      src -= dims_[k].size * dims_[k].src;
      index_[k] = 0;
    }
  }
  const std::vector<Dim>& dims_;
  std::vector<int64_t> index_;  // the last dimension's index lives in last_index_
  Dim last_{1, 0, 0};
  int64_t last_index_ = 0;
};

// Runs fn(begin, end) over [0, n) in pieces, threaded when the copy is large.
template <typename Fn>
void for_pieces(int64_t n, int64_t numel, Fn&& fn) {
  const int threads = numel >= detail::kParallelElements ? detail::elementwise_threads() : 1;
  const int64_t pieces = std::min<int64_t>(n, 4 * int64_t(threads));
  if (threads <= 1 || pieces <= 1) {  // (four pieces on one thread still opened a region)
    fn(int64_t(0), n);
    return;
  }
  detail::parallel_chunks(pieces, [&](int64_t c) { fn(n * c / pieces, n * (c + 1) / pieces); });
}

// Contiguous runs on both sides: one copy per run. Short runs (up to 1 KiB) of a source far
// beyond the L2 (a permute of heads or channels, e.g. [16, 64, 56, 56].permute(0, 2, 1, 3))
// are read at a large stride from run to run, which the hardware prefetchers do not follow:
// each run's lines are requested kPrefetchRuns runs ahead. Timed alternately on Zen 3 (kiln's
// Python API, best of 9, four rounds): [16, 64, 56, 56] float32 2.5 -> 1.35 ms on one thread,
// 1.43 -> 1.0 on two; [8, 512, 16, 64] 4.7 -> 2.1 and 2.6 -> 1.7 (PyTorch 2.13: 2.3 / 1.6 and
// 2.9 / 1.9). Sources of a few MiB, served by the L3, ran as fast or slower with it.
constexpr int64_t kPrefetchRuns = 8;
constexpr int64_t kPrefetchMaxRunBytes = 1024;
constexpr int64_t kPrefetchMinBytes = int64_t(8) << 20;

template <typename E>
void copy_runs(const E* src, E* dst, const Dim& run, const std::vector<Dim>& outer,
               int64_t numel) {
  const int64_t run_bytes = run.size * int64_t(sizeof(E));
  const bool prefetch = run_bytes <= kPrefetchMaxRunBytes &&
                        numel * int64_t(sizeof(E)) >= kPrefetchMinBytes;
  for_pieces(count(outer), numel, [&](int64_t b, int64_t e) {
    OuterWalk w(outer, b);
    if (!prefetch) {
      for (int64_t i = b; i < e; ++i, w.next())
        detail::copy_bytes(dst + w.dst, src + w.src, size_t(run_bytes));
      return;
    }
    OuterWalk ahead(outer, std::min(b + kPrefetchRuns, e));
    for (int64_t i = b; i < e; ++i, w.next()) {
      if (i + kPrefetchRuns < e) {
        const char* q = reinterpret_cast<const char*>(src + ahead.src);
        for (int64_t k = 0; k < run_bytes; k += 64) __builtin_prefetch(q + k);
        __builtin_prefetch(q + run_bytes - 1);  // the run's last line when it is unaligned
        ahead.next();
      }
      detail::copy_bytes(dst + w.dst, src + w.src, size_t(run_bytes));
    }
  });
}

// Runs of 32 bytes to 1 KiB on both sides through the ISA level's run mover (vector moves of
// a whole run, no call per run), a row of runs (the outer index space's last dimension, split
// where a thread's share starts or ends) per call. Sources beyond kPrefetchMinBytes have the
// next row's runs requested while a row is moved, as copy_runs does kPrefetchRuns runs ahead.
// A permute's copy into a preallocated output (out.copy_(x.permute(0, 2, 1, 3))), bfloat16,
// libraries alternated twice, Zen 5, one / two threads: [16, 64, 56, 56] 211-243 -> 125-127
// / 115-152 -> 65-67 us (PyTorch 149-175 / 84-104), [64, 12, 128, 48] 511-627 -> 274-304 /
// 249-286 -> 127-135 (PyTorch 402-438 / 175-205). Per-run memcpy calls and a walk call per
// run had taken the time, not the memory.
using MoveRuns = void (*)(const char*, int64_t, char*, int64_t, int64_t, int64_t);

template <typename E>
void move_rows(const E* src, E* dst, int64_t run_bytes, std::vector<Dim> outer, int64_t numel,
               MoveRuns move) {
  const Dim row = outer.empty() ? Dim{1, 0, 0} : outer.back();
  if (!outer.empty()) outer.pop_back();
  const int64_t rows = count(outer), e_size = int64_t(sizeof(E));
  const bool prefetch = numel * e_size >= kPrefetchMinBytes;
  for_pieces(rows * row.size, numel, [&](int64_t b, int64_t e) {
    OuterWalk w(outer, b / row.size), ahead(outer, b / row.size);
    ahead.next();  // one row ahead (offsets wrap to the start after the last row: harmless)
    for (int64_t i = b, j = b % row.size; i < e; i += row.size - j, j = 0, w.next()) {
      const int64_t n = std::min(row.size - j, e - i);
      if (prefetch) {
        const char* q = reinterpret_cast<const char*>(src + ahead.src + j * row.src);
        for (int64_t r = 0; r < n; ++r, q += row.src * e_size) {
          for (int64_t k = 0; k < run_bytes; k += 64) __builtin_prefetch(q + k);
          __builtin_prefetch(q + run_bytes - 1);  // the run's last line when it is unaligned
        }
        ahead.next();
      }
      move(reinterpret_cast<const char*>(src + w.src + j * row.src), row.src * e_size,
           reinterpret_cast<char*>(dst + w.dst + j * row.dst), row.dst * e_size, n, run_bytes);
    }
  });
}

// Runs shorter than 32 bytes (or up to 128 without a run mover): moves of a compile-time size,
// which the compiler makes register loads and stores; a memcpy call per run spends as long in
// its size checks as in the move.
template <size_t kBytes>
struct FixedMove {  // exactly kBytes
  void operator()(char* d, const char* s) const { std::memcpy(d, s, kBytes); }
};
template <size_t kHalf>
struct OverlappingMove {  // kHalf + 1 to 2 kHalf bytes: two moves overlapping in the middle
  size_t tail;            // run bytes - kHalf: where the second move starts
  void operator()(char* d, const char* s) const {
    std::memcpy(d, s, kHalf);
    std::memcpy(d + tail, s + tail, kHalf);
  }
};

// Moves the runs at the outer index space's offsets, in the destination's order.
template <typename E, typename Move>
void move_runs(const E* src, E* dst, const std::vector<Dim>& outer, int64_t numel, Move move) {
  for_pieces(count(outer), numel, [&](int64_t b, int64_t e) {
    OuterWalk w(outer, b);
    for (int64_t i = b; i < e; ++i, w.next())
      move(reinterpret_cast<char*>(dst + w.dst), reinterpret_cast<const char*>(src + w.src));
  });
}

// The tile transpose in vector registers for E, or null (scalar tiles).
template <typename E>
auto vector_tile() {
  if constexpr (sizeof(E) == 4) return data_moves().transpose_b32;
  else if constexpr (sizeof(E) == 2) return data_moves().transpose_b16;
  else return static_cast<void (*)(const E*, int64_t, E*, int64_t)>(nullptr);
}

// A transposed pair: `inner` is contiguous in the destination, `across` in the source. A
// tile is one cache line of values each way (16 x 16 four-byte values), so every line it
// touches is read or written whole: in vector registers where the ISA level has a tile
// transpose for this size, else through a local buffer. Walking either side element by
// element instead touches a new line per element, and with power-of-two strides those lines
// all fall in the same cache set and evict each other.
template <typename E>
void copy_tiles(const E* src, E* dst, const Dim& inner, const Dim& across,
                const std::vector<Dim>& outer, int64_t numel) {
  // A cache line of values (16 for the vector tiles' 2- and 4-byte values), at least 8.
  constexpr int64_t kEdge = sizeof(E) == 1 ? 64 : sizeof(E) == 8 ? 8 : 16;
  const auto tile = vector_tile<E>();
  const int64_t bands = (across.size + kEdge - 1) / kEdge;
  for_pieces(count(outer) * bands, numel, [&](int64_t b, int64_t e) {
    OuterWalk w(outer, b / bands);
    E buf[kEdge][kEdge];
    for (int64_t item = b; item < e; ++item) {
      if (item != b && item % bands == 0) w.next();
      const int64_t t0 = item % bands * kEdge, tb = std::min(kEdge, across.size - t0);
      for (int64_t l0 = 0; l0 < inner.size; l0 += kEdge) {
        const int64_t lb = std::min(kEdge, inner.size - l0);
        const E* in = src + w.src + t0 + l0 * inner.src;
        E* out = dst + w.dst + t0 * across.dst + l0;
        if (tile && tb == kEdge && lb == kEdge) {
          tile(in, inner.src, out, across.dst);
          continue;
        }
        for (int64_t l = 0; l < lb; ++l)
          for (int64_t t = 0; t < tb; ++t) buf[l][t] = in[l * inner.src + t];
        for (int64_t t = 0; t < tb; ++t)
          for (int64_t l = 0; l < lb; ++l) out[t * across.dst + l] = buf[l][t];
      }
    }
  });
}

template <typename E>
bool copy_as(const Tensor& src, const Tensor& dst, std::vector<Dim> dims) {
  const E* s = static_cast<const E*>(src.raw_data());
  E* d = static_cast<E*>(dst.raw_data());
  const Dim inner = dims.back();
  dims.pop_back();
  const int64_t numel = dst.numel();
  if (inner.src == 1) {
    const int64_t bytes = inner.size * int64_t(sizeof(E));
    const MoveRuns mover = data_moves().move_runs;
    if (mover && bytes >= 32 && bytes <= kPrefetchMaxRunBytes) {
      move_rows(s, d, bytes, dims, numel, mover);
      return true;
    }
    // Without a run mover (the baseline level), runs of one or two cache lines (attention
    // heads of 32 or 64 values) of a cached source take a fixed-size move per run
    // (permute(0, 2, 1, 3).contiguous() of [64, 32, 30, 32] bfloat16, two threads,
    // alternating: 0.185 -> 0.161 ms, PyTorch 0.163; float32 0.56 -> 0.46, [16, 128, 12, 32]
    // 0.077 -> 0.065). Large sources keep copy_runs, whose prefetching matters more there.
    const bool cached = numel * int64_t(sizeof(E)) < kPrefetchMinBytes;
    if (bytes == 64 && cached) {
      move_runs(s, d, dims, numel, FixedMove<64>{});
      return true;
    }
    if (bytes == 128 && cached) {
      move_runs(s, d, dims, numel, FixedMove<128>{});
      return true;
    }
    if (bytes >= 64) {
      copy_runs(s, d, inner, dims, numel);
      return true;
    }
    // Runs shorter than a cache line: one fixed-size move per run, or two overlapping ones
    // (the generic element loop took 16 us for x[::2].contiguous() of [4096, 8] float32,
    // PyTorch 7.5).
    const size_t n = size_t(bytes);
    if (n == 8) move_runs(s, d, dims, numel, FixedMove<8>{});
    else if (n == 16) move_runs(s, d, dims, numel, FixedMove<16>{});
    else if (n == 32) move_runs(s, d, dims, numel, FixedMove<32>{});
    else if (n > 8 && n < 16) move_runs(s, d, dims, numel, OverlappingMove<8>{n - 8});
    else if (n > 16 && n < 32) move_runs(s, d, dims, numel, OverlappingMove<16>{n - 16});
    else if (n > 32) move_runs(s, d, dims, numel, OverlappingMove<32>{n - 32});
    else return false;  // under 8 bytes: the element loop is as fast
    return true;
  }
  // A source-contiguous dimension to pair with the destination's inner one.
  const auto across =
      std::find_if(dims.begin(), dims.end(), [](const Dim& x) { return x.src == 1; });
  if (across == dims.end()) return false;
  const Dim pair = *across;
  dims.erase(across);
  copy_tiles(s, d, inner, pair, dims, numel);
  return true;
}

}  // namespace

bool copy_permuted(const Tensor& src, const Tensor& dst) {
  if (src.dtype() != dst.dtype() || src.shape() != dst.shape() || dst.numel() < kMinElements)
    return false;
  for (int64_t i = 0; i < dst.dim(); ++i)
    if (src.stride(i) < 0 || dst.stride(i) < 0) return false;
  const std::vector<Dim> dims = coalesced_dims(src, dst);
  // The destination must end in a unit-stride run, and must not alias itself (a broadcast
  // destination) or the source.
  if (dims.empty() || dims.back().dst != 1) return false;
  for (size_t k = 0; k + 1 < dims.size(); ++k)
    if (dims[k].dst < dims[k + 1].dst * dims[k + 1].size) return false;
  const auto [s_lo, s_hi] = byte_span(src);
  const auto [d_lo, d_hi] = byte_span(dst);
  if (s_lo <= d_hi && d_lo <= s_hi) return false;
  switch (dst.element_size()) {
    case 1: return copy_as<uint8_t>(src, dst, dims);
    case 2: return copy_as<uint16_t>(src, dst, dims);
    case 4: return copy_as<uint32_t>(src, dst, dims);
    case 8: return copy_as<uint64_t>(src, dst, dims);
    default: return false;
  }
}

Tensor contiguous_like(const Tensor& t) { return empty_tensor(t.shape(), t.dtype(), t.device()); }

Tensor contiguous_copy_by_blocks(const Tensor& t) {
  Tensor copy = contiguous_like(t);
  return copy_permuted(t, copy) ? copy : Tensor();
}

void copy_by_blocks_or_elements(const Tensor& src, const Tensor& dst) {
  if (!copy_permuted(src, dst)) copy_same_shape(dst, src);
}

}  // namespace kiln::cpu
