// CPU kernels for the shape-building ops: cat, tril/triu, repeat, repeat_interleave (tensor
// repeats), flip, roll, pad and one_hot. All move whole elements by bytes, so they work for
// every dtype without dispatch. Where both last dimensions are contiguous runs, tril / triu,
// repeat, flip, roll and pad go a row at a time (row_loops.h: copy_bytes / memset per row piece,
// threaded); other layouts take the element loops.
#include <algorithm>
#include <cstring>
#include <vector>

#include "index_loops.h"
#include "isa/data_moves.h"
#include "permuted_copy.h"
#include "parallel_pieces.h"
#include "row_loops.h"
#include "kiln/tensor/copy_bytes.h"
#include "kiln/tensor/empty.h"
#include "kiln/tensor/streaming_store.h"
#include "kiln/backends/cpu/parallel_region.h"

namespace kiln::cpu {

namespace {

// dst[0, n) = src[0, n): the sizes of narrow rows (2 to 64 bytes, powers of two) as inlined
// fixed-size moves, others through copy_bytes.
inline void copy_small_block(char* dst, const char* src, int64_t n) {
  switch (n) {
    case 2: std::memcpy(dst, src, 2); return;
    case 4: std::memcpy(dst, src, 4); return;
    case 8: std::memcpy(dst, src, 8); return;
    case 16: std::memcpy(dst, src, 16); return;
    case 32: std::memcpy(dst, src, 32); return;
    case 64: std::memcpy(dst, src, 64); return;
    default: detail::copy_bytes(dst, src, size_t(n));
  }
}

// Copies input t into slot (same shape; both with contiguous last-dimension rows), rows
// [begin, end) in row-major order, the outer coordinates by an odometer over byte strides
// read once (Tensor::size / stride per row cost 7x the copy of 16-byte rows).
void copy_dense_rows(const Tensor& t, const Tensor& slot, int64_t begin, int64_t end) {
  const size_t outer = size_t(t.dim() - 1);
  const int64_t es = int64_t(t.element_size());
  const int64_t row = t.size(int64_t(outer)) * es;
  std::vector<int64_t> size(outer), in_step(outer), out_step(outer), c(outer, 0);
  int64_t in_off = 0, out_off = 0, r = begin;
  for (size_t d = outer; d-- > 0;) {
    size[d] = t.size(int64_t(d));
    in_step[d] = t.stride(int64_t(d)) * es;
    out_step[d] = slot.stride(int64_t(d)) * es;
    c[d] = r % size[d];
    r /= size[d];
    in_off += c[d] * in_step[d];
    out_off += c[d] * out_step[d];
  }
  const char* src = bytes_of(t);
  char* dst = bytes_of(slot);
  if (outer == 1) {  // matrices: no odometer
    for (int64_t i = begin; i < end; ++i)
      copy_small_block(dst + i * out_step[0], src + i * in_step[0], row);
    return;
  }
  for (int64_t i = begin; i < end; ++i) {
    copy_small_block(dst + out_off, src + in_off, row);
    for (size_t d = outer; d-- > 0;) {
      in_off += in_step[d];
      out_off += out_step[d];
      if (++c[d] < size[d]) break;
      in_off -= in_step[d] * size[d];
      out_off -= out_step[d] * size[d];
      c[d] = 0;
    }
  }
}

// Strided inputs whose last dimension is contiguous (x.chunk(k, -1), column slices) into a
// contiguous output, along any dim but the last: every input's rows copied to its slot in one
// threaded loop over pieces
// of all inputs. Through copy_permuted, input by input (a threaded region each, and an
// element loop for 2-byte elements in 4-byte rows), cat(x.chunk(4, -1), 0) of a [4096, 8]
// bfloat16 took 2.1x PyTorch's time and of an [8, 4096] float32 2.0x.
bool cat_dense_rows(const OpCall& call, int64_t d) {
  const Tensor& out = call.outs[0];
  const int64_t nd = out.dim();
  // Along the last dim, the inputs' pieces of each output row interleave: the threads then
  // wrote alternate runs of the same rows, 1.6-1.9x slower than copy_permuted's row order.
  if (nd < 2 || d == nd - 1 || !out.is_contiguous()) return false;
  struct Piece {
    size_t input;
    int64_t begin, end;
  };
  std::vector<Tensor> slots;
  int64_t total = 0, start = 0;
  for (const Tensor& t : call.inputs) {
    if (t.numel() > 0 && t.size(nd - 1) > 1 && t.stride(nd - 1) != 1) return false;
    slots.push_back(out.slice(d, start, start + t.size(d)));
    start += t.size(d);
    total += int64_t(t.nbytes());
  }
  // Threads from 256 KiB, or from 4096 rows (narrow rows cost a few ns each).
  const int64_t all_rows = out.numel() / std::max<int64_t>(out.size(nd - 1), 1);
  const int threads = total >= (int64_t(1) << 18) || all_rows >= 4096
                          ? detail::elementwise_threads() : 1;
  std::vector<Piece> pieces;
  for (size_t i = 0; i < slots.size(); ++i) {
    const Tensor& t = call.inputs[i];
    if (t.numel() == 0) continue;
    const int64_t rows = t.numel() / t.size(nd - 1);
    // Pieces in proportion to the input's share of the bytes, at least one.
    const int64_t k = threads <= 1 ? 1
                      : std::clamp<int64_t>(4 * threads * int64_t(t.nbytes()) / total, 1, rows);
    for (int64_t p = 0; p < k; ++p) pieces.push_back({i, rows * p / k, rows * (p + 1) / k});
  }
  const int64_t n = int64_t(pieces.size());
  auto run = [&](int64_t p) {
    const Piece& q = pieces[size_t(p)];
    copy_dense_rows(call.inputs[q.input], slots[q.input], q.begin, q.end);
  };
  if (threads <= 1) {
    for (int64_t p = 0; p < n; ++p) run(p);
  } else {
    detail::parallel_chunks(n, run);
  }
  return true;
}

// inputs: tensors of one dtype and rank; attrs: dim. Each input lands in a slab of out.
void cat_kernel(OpCall& call) {
  const Tensor& out = call.outs[0];
  int64_t d = wrap_dim(call.int_attr(0), out.dim());
  char* o = bytes_of(out);
  size_t es = out.element_size();
  int64_t start = 0;
  // Contiguous inputs and output: each input is `outer` blocks of t.size(d) * inner elements
  // landing at a fixed offset in each output block, so a memcpy per block. All channels-last:
  // the same on the [N, H, W, C] order of their memory.
  bool contiguous = out.is_contiguous();
  for (const Tensor& t : call.inputs) contiguous = contiguous && t.is_contiguous();
  bool nhwc = !contiguous && out.dim() == 4 && out.is_contiguous(MemoryFormat::ChannelsLast);
  for (const Tensor& t : call.inputs)
    nhwc = nhwc && t.is_contiguous(MemoryFormat::ChannelsLast);
  static constexpr int64_t kMemoryOrder[4] = {0, 2, 3, 1};  // NHWC dim i is NCHW dim [i]
  auto size_in_memory_order = [&](const Tensor& t, int64_t i) {
    return nhwc ? t.size(kMemoryOrder[i]) : t.size(i);
  };
  const int64_t dm = nhwc ? (d == 1 ? 3 : d == 0 ? 0 : d - 1) : d;  // d in memory order
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < dm; ++i) outer *= size_in_memory_order(out, i);
  for (int64_t i = dm + 1; i < out.dim(); ++i) inner *= size_in_memory_order(out, i);
  if (contiguous || nhwc) {
    const int64_t out_block = out.size(d) * inner * int64_t(es);
    if (outer == 1) {
      // One block per input (cat along dim 0): out is the inputs' bytes one after another,
      // copied in threaded pieces of the whole output (parallel_pieces over bytes), each
      // piece from the inputs it overlaps. A threaded copy per input (cat of two [2048, 512]
      // float32 along dim 0: 438 us on one thread, torch 202) left inputs under 1 MiB on one
      // thread: two [512, 512] bfloat16 took 34.5 us, torch 16.1.
      // Pieces in units of 8 bytes: threaded from 512 KiB (parallel_pieces' threshold).
      const int64_t total = int64_t(out.nbytes());
      const bool stream = total >= detail::kStreamingStoreBytes;
      parallel_pieces((total + 7) / 8, [&](int64_t b, int64_t e) {
        b = std::min(b * 8, total);
        e = std::min(e * 8, total);
        int64_t at = 0;
        for (const Tensor& t : call.inputs) {
          const int64_t n = int64_t(t.nbytes()), lo = std::max(b, at), hi = std::min(e, at + n);
          if (lo < hi) {
            if (stream) detail::stream_store(o + lo, bytes_of(t) + (lo - at), size_t(hi - lo));
            else detail::copy_bytes(o + lo, bytes_of(t) + (lo - at), size_t(hi - lo));
          }
          at += n;
        }
        if (stream) detail::stream_fence();
      });
      return;
    }
    // One threaded loop over the output's blocks, each filled from every input in turn. The
    // inputs' pointers and block sizes are read once, and blocks of up to 64 bytes are copied
    // by fixed-size moves the compiler inlines: cat along the last dim of two [4096, 8]
    // float32 (32-byte blocks) took 37.5 us through a memcpy call and two tensor lookups per
    // block, PyTorch 15.8.
    struct Slab {
      const char* src;
      int64_t block;
    };
    std::vector<Slab> slabs;
    slabs.reserve(call.inputs.size());
    for (const Tensor& t : call.inputs) slabs.push_back({bytes_of(t), t.size(d) * inner * int64_t(es)});
    parallel_region(outer * out_block >= (int64_t(1) << 18), [&] {
#pragma omp for schedule(static)
      for (int64_t r = 0; r < outer; ++r) {
        char* dst = o + r * out_block;
        for (const Slab& s : slabs) {
          copy_small_block(dst, s.src + r * s.block, s.block);
          dst += s.block;
        }
      }
    });
    return;
  }
  if (cat_dense_rows(call, d)) return;
  // Other layouts: each input copied into its slice of out with the strided copies (tiled
  // where a pair of dims is transposed, threaded). The single-threaded element loop took
  // 4.8 ms to cat four column chunks of a [2048, 512] float32 along dim 0 (torch: 65 us).
  for (const Tensor& t : call.inputs) {
    if (t.numel() > 0) {
      const Tensor slot = out.slice(d, start, start + t.size(d));
      if (!copy_permuted(t, slot)) copy_same_shape(slot, t);
    }
    start += t.size(d);
  }
}

// attrs: diagonal. Keeps x[..., i, j] where j - i <= k (tril) or j - i >= k (triu).
template <bool Lower>
void tri_kernel(OpCall& call) {
  const Tensor& x = call.inputs[0];
  const Tensor& out = call.outs[0];
  int64_t k = call.int_attr(0);
  int64_t nd = x.dim();
  ElemBytes zero = scalar_bytes(0.0, x.dtype());
  char* o = bytes_of(out);
  const char* s = bytes_of(x);
  size_t es = x.element_size();
  if (rows_are_dense(x) && rows_are_dense(out)) {
    // Row i keeps columns [a, b) and zeroes the rest (all-zero bytes are 0 in every dtype);
    // memmove: tril_ / triu_ pass the same tensor as input and output.
    const int64_t W = x.size(nd - 1);
    for_each_row(out.shape(), out.strides(), [&](const int64_t* c, int64_t off) {
      int64_t src = 0;
      for (int64_t d = 0; d + 1 < nd; ++d) src += c[d] * x.stride(d);
      const int64_t i = c[nd - 2];
      const int64_t a = Lower ? 0 : std::clamp<int64_t>(i + k, 0, W);
      const int64_t b = Lower ? std::clamp<int64_t>(i + k + 1, 0, W) : W;
      char* row = o + off * int64_t(es);
      std::memset(row, 0, size_t(a) * es);
      std::memmove(row + a * int64_t(es), s + (src + a) * int64_t(es), size_t(b - a) * es);
      std::memset(row + b * int64_t(es), 0, size_t(W - b) * es);
    });
    return;
  }
  for_each_offset(x.shape(), {out.strides(), x.strides()},
                  [&](const int64_t* off, const int64_t* c) {
                    int64_t diff = c[nd - 1] - c[nd - 2];
                    bool keep = Lower ? diff <= k : diff >= k;
                    if (keep) copy_elem(o, off[0], s, off[1], es);
                    else copy_elem(o, off[0], zero.bytes, 0, es);
                  });
}

// attrs: repeats (at least x.dim() entries). out[c] = x[c mod x.shape] (leading dims new).
void repeat_kernel(OpCall& call) {
  const Tensor& x = call.inputs[0];
  const Tensor& out = call.outs[0];
  size_t m = size_t(out.dim()), lead = m - size_t(x.dim());
  Shape xs(m, 1);
  Strides st(m, 0);
  for (size_t i = lead; i < m; ++i) {
    xs[i] = x.shape()[i - lead];
    st[i] = x.strides()[i - lead];
  }
  char* o = bytes_of(out);
  const char* s = bytes_of(x);
  size_t es = x.element_size();
  if (x.dim() >= 1 && rows_are_dense(x) && rows_are_dense(out)) {
    // Each output row is the source row (coordinates modulo the input's sizes) repeated.
    const int64_t n = xs[m - 1], reps = n > 0 ? out.size(int64_t(m) - 1) / n : 0;
    for_each_row(out.shape(), out.strides(), [&](const int64_t* c, int64_t off) {
      int64_t src = 0;
      for (size_t i = lead; i + 1 < m; ++i) src += (c[i] % xs[i]) * st[i];
      for (int64_t r = 0; r < reps; ++r)
        detail::copy_bytes(o + (off + r * n) * int64_t(es), s + src * int64_t(es), size_t(n) * es);
    });
    return;
  }
  for_each_offset(out.shape(), {out.strides()}, [&](const int64_t* off, const int64_t* c) {
    int64_t src = 0;
    for (size_t i = lead; i < m; ++i) src += (c[i] % xs[i]) * st[i];
    copy_elem(o, off[0], s, src, es);
  });
}

// inputs: self (>= 1-d), repeats (1 or self.size(dim) counts); attrs: dim. Dynamic shape.
void repeat_interleave_kernel(OpCall& call) {
  const Tensor& x = call.inputs[0];
  const Tensor& reps = call.inputs[1];
  int64_t d = call.int_attr(0), n = x.size(d);
  int64_t rstride = reps.dim() == 0 ? 0 : reps.stride(0);
  std::vector<int64_t> r(static_cast<size_t>(n));
  int64_t total = 0;
  for (int64_t i = 0; i < n; ++i) {
    int64_t v = read_index(bytes_of(reps), reps.dtype(), reps.numel() == 1 ? 0 : i * rstride);
    KILN_CHECK(v >= 0, Error, "repeat_interleave: repeats can not be negative, got ", v);
    r[size_t(i)] = v;
    total += v;
  }
  Shape s = x.shape();
  s[size_t(d)] = total;
  Tensor out = empty_tensor(s, x.dtype(), x.device());
  // src[j]: the input position along dim of output position j.
  std::vector<int64_t> src;
  src.reserve(size_t(total));
  for (int64_t i = 0; i < n; ++i) src.insert(src.end(), size_t(r[size_t(i)]), i);
  Strides xs = x.strides();
  xs[size_t(d)] = 0;
  char* o = bytes_of(out);
  const char* p = bytes_of(x);
  size_t es = x.element_size();
  int64_t step = x.stride(d);
  for_each_offset(s, {out.strides(), xs}, [&](const int64_t* off, const int64_t* c) {
    copy_elem(o, off[0], p, off[1] + src[size_t(c[d])] * step, es);
  });
  call.outs = {out};
}

// Contiguous [numel / w, w] flipped along its rows of w <= kShortFlipRow values, by one
// typed loop over all of them: a row callback and a vector-reversal call per row cost 36 us
// for [4096, 8] float32 (PyTorch 16). False for element sizes other than 1, 2, 4 and 8.
constexpr int64_t kShortFlipRow = 32;
bool flip_short_rows(const char* src, char* dst, int64_t numel, int64_t w, size_t es) {
  return with_word_of_size(es, [&]<typename W>() {
    const W* x = reinterpret_cast<const W*>(src);
    W* out = reinterpret_cast<W*>(dst);
    parallel_pieces(numel / w, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const W* row = x + r * w + (w - 1);
        W* o = out + r * w;
        for (int64_t j = 0; j < w; ++j) o[j] = row[-j];
      }
    });
  });
}

// attrs: dims (wrapped, unique).
void flip_kernel(OpCall& call) {
  const Tensor& x = call.inputs[0];
  const Tensor& out = call.outs[0];
  Strides st = x.strides();
  int64_t base = 0;
  for (int64_t d : call.ints_attr(0)) {
    if (x.size(d) == 0) return;
    base += (x.size(d) - 1) * st[size_t(d)];
    st[size_t(d)] = -st[size_t(d)];
  }
  char* o = bytes_of(out);
  const char* s = bytes_of(x);
  size_t es = x.element_size();
  const int64_t nd = x.dim();
  const std::vector<int64_t>& dims = call.ints_attr(0);
  if (dims.size() == 1 && dims[0] == nd - 1 && x.size(nd - 1) <= kShortFlipRow &&
      x.is_contiguous() && out.is_contiguous() &&
      flip_short_rows(s, o, x.numel(), x.size(nd - 1), es))
    return;
  if (rows_are_dense(x) && rows_are_dense(out)) {
    // A row flipped along the last dimension is read backwards, else copied whole.
    const int64_t W = x.size(nd - 1);
    const bool reversed = st[size_t(nd - 1)] < 0;
    for_each_row(out.shape(), out.strides(), [&](const int64_t* c, int64_t off) {
      int64_t src = base;
      for (int64_t d = 0; d + 1 < nd; ++d) src += c[d] * st[size_t(d)];
      if (reversed)
        reverse_row(o + off * int64_t(es), s + src * int64_t(es), W, es);
      else
        detail::copy_bytes(o + off * int64_t(es), s + src * int64_t(es), size_t(W) * es);
    });
    return;
  }
  for_each_offset(x.shape(), {out.strides(), st}, [&](const int64_t* off, const int64_t*) {
    copy_elem(o, off[0], s, base + off[1], es);
  });
}

// attrs: shifts, dims (wrapped; a dim may repeat, its shifts add up).
void roll_kernel(OpCall& call) {
  const Tensor& x = call.inputs[0];
  const Tensor& out = call.outs[0];
  const auto& shifts = call.ints_attr(0);
  const auto& dims = call.ints_attr(1);
  int64_t nd = x.dim();
  if (x.numel() == 0) return;
  std::vector<int64_t> shift(static_cast<size_t>(nd), 0);
  for (size_t i = 0; i < dims.size(); ++i) {
    int64_t n = x.size(dims[i]);
    shift[size_t(dims[i])] = ((shift[size_t(dims[i])] + shifts[i] % n) % n + n) % n;
  }
  char* o = bytes_of(out);
  const char* s = bytes_of(x);
  size_t es = x.element_size();
  if (rows_are_dense(x) && rows_are_dense(out)) {
    // out[j] = x[(j - shift) mod n] along the last dimension: two pieces per row.
    const int64_t W = x.size(nd - 1), sh = shift[size_t(nd - 1)];
    for_each_row(out.shape(), out.strides(), [&](const int64_t* c, int64_t off) {
      int64_t src = 0;
      for (int64_t d = 0; d + 1 < nd; ++d) {
        const int64_t i = c[d] - shift[size_t(d)];
        src += (i < 0 ? i + x.size(d) : i) * x.stride(d);
      }
      char* row = o + off * int64_t(es);
      const char* in = s + src * int64_t(es);
      detail::copy_bytes(row, in + (W - sh) * int64_t(es), size_t(sh) * es);
      detail::copy_bytes(row + sh * int64_t(es), in, size_t(W - sh) * es);
    });
    return;
  }
  for_each_offset(x.shape(), {out.strides()}, [&](const int64_t* off, const int64_t* c) {
    int64_t src = 0;
    for (int64_t d = 0; d < nd; ++d) {
      int64_t n = x.size(d), i = c[d] - shift[size_t(d)];
      src += (i < 0 ? i + n : i) * x.stride(d);
    }
    copy_elem(o, off[0], s, src, es);
  });
}

// attrs: pad (pairs, last dim first), mode, value. Validated by the meta function.
// The source index of padded position i along a dim of size n, or -1 where the constant
// mode fills.
inline int64_t pad_source(int64_t i, int64_t n, int mode_id) {
  if (i >= 0 && i < n) return i;
  switch (mode_id) {
    case 0:
      return -1;
    case 1:
      return i < 0 ? -i : 2 * (n - 1) - i;
    case 2:
      return std::clamp<int64_t>(i, 0, n - 1);
    default:
      return ((i % n) + n) % n;
  }
}

// Constant padding that grows at most two adjacent dims of a contiguous tensor into a
// contiguous output: x viewed as [outer, A, B, inner] with only A and B padded (NCHW: A, B =
// H, W and inner 1; a channels-last input's NHWC view: inner = C). Each output row (one
// index along A) is written once, in order: edges filled and the source row copied as
// inner-element runs, words of the element's size. The general path's fill pass over the
// whole output plus a memcpy per source row of 16-28 elements ran [64, 128, 16, 16] float32
// padded by 1 in 645 us against torch's 252.
bool pad_two_dims(const Tensor& x, const Tensor& out, const std::vector<int64_t>& left,
                  const ElemBytes& fill) {
  const int64_t nd = x.dim();
  if (!x.is_contiguous() || !out.is_contiguous() || out.numel() == 0) return false;
  int64_t first = -1, last = -1;  // padded dims
  for (int64_t d = 0; d < nd; ++d)
    if (out.size(d) != x.size(d)) {
      if (first < 0) first = d;
      last = d;
    }
  if (first < 0 || last - first > 1) return false;
  const int64_t a_dim = first, b_dim = last;
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < a_dim; ++d) outer *= x.size(d);
  for (int64_t d = b_dim + 1; d < nd; ++d) inner *= x.size(d);
  const bool one = a_dim == b_dim;  // one padded dim: A is 1
  const int64_t A = one ? 1 : x.size(a_dim), OA = one ? 1 : out.size(a_dim);
  const int64_t top = one ? 0 : left[size_t(a_dim)];
  const int64_t B = x.size(b_dim), OB = out.size(b_dim), lb = left[size_t(b_dim)];
  const size_t es = x.element_size();
  return with_word_of_size(es, [&]<typename W>() {
    W v;
    std::memcpy(&v, fill.bytes, sizeof(W));
    const W* src = static_cast<const W*>(x.raw_data());
    W* dst = static_cast<W*>(out.raw_data());
    const int64_t row_in = B * inner, row_out = OB * inner, left_n = lb * inner;
    const int64_t rows = outer * OA;
    // Source rows of 32 bytes to 1 KiB go to their places through the ISA's run mover, all
    // of a plane's rows in a piece per call (a memcpy call per row of 56 bfloat16 values
    // spent more in the call than in the move). Padded by 1 on H and W, two threads, libraries
    // alternated twice: [16, 64, 56, 56] bfloat16 149 -> 98-103 us (PyTorch 122-126), float32
    // 203-211 -> 185-187 (496-524), [64, 128, 16, 16] float32 321-322 -> 174-178 (304-318).
    const int64_t row_bytes = row_in * int64_t(sizeof(W));
    const auto mover = row_bytes >= 32 && row_bytes <= 1024 ? data_moves().move_runs : nullptr;
    auto run = [&](int64_t r0, int64_t r1) {
      // Output row r is row a of plane r / OA; one division per piece, not per row.
      int64_t plane = r0 / OA, a = r0 % OA;
      for (int64_t r = r0; r < r1;) {
        const int64_t end = std::min(r1, r + OA - a);  // this plane's rows in the piece
        const int64_t first_in = r + std::clamp<int64_t>(top - a, 0, end - r);
        const int64_t last_in = r + std::clamp<int64_t>(top + A - a, 0, end - r);
        std::fill(dst + r * row_out, dst + first_in * row_out, v);  // rows above the source
        std::fill(dst + last_in * row_out, dst + end * row_out, v);  // and below it
        // The source row of output row first_in (formed only when a source row lands here).
        const W* in = last_in > first_in ? src + (plane * A + a + first_in - r - top) * row_in
                                         : src;
        for (int64_t k = first_in; k < last_in; ++k) {
          W* o = dst + k * row_out;
          std::fill(o, o + left_n, v);
          std::fill(o + left_n + row_in, o + row_out, v);
          if (!mover) detail::copy_bytes(o + left_n, in + (k - first_in) * row_in,
                                         size_t(row_bytes));  // null when empty
        }
        if (mover && last_in > first_in)
          mover(reinterpret_cast<const char*>(in), row_bytes,
                reinterpret_cast<char*>(dst + first_in * row_out + left_n),
                row_out * int64_t(sizeof(W)), last_in - first_in, row_bytes);
        a += end - r;
        if (a == OA) a = 0, ++plane;
        r = end;
      }
    };
    const int64_t pieces = out.numel() >= detail::kParallelElements
                               ? std::min<int64_t>(rows, 4 * detail::elementwise_threads())
                               : 1;
    if (pieces <= 1) return run(0, rows);
    detail::parallel_chunks(pieces,
                            [&](int64_t p) { run(rows * p / pieces, rows * (p + 1) / pieces); });
  });
}

// Row by row over the last dim (for_each_row, threaded): the outer dims map to one source row
// (or a filled row), the row's interior is one memcpy when both last dims are contiguous, and
// only the padded edges are mapped element by element.
void pad_kernel(OpCall& call) {
  const Tensor& x = call.inputs[0];
  const Tensor& out = call.outs[0];
  const auto& pad = call.ints_attr(0);
  const std::string& mode = call.string_attr(1);
  int mode_id = mode == "constant" ? 0 : mode == "reflect" ? 1 : mode == "replicate" ? 2 : 3;
  ElemBytes fill = scalar_bytes(call.has_attr(2) ? call.double_attr(2) : 0.0, x.dtype());
  const int64_t nd = x.dim();
  char* o = bytes_of(out);
  const char* s = bytes_of(x);
  const size_t es = x.element_size();
  if (nd == 0) {
    copy_elem(o, 0, s, 0, es);
    return;
  }
  std::vector<int64_t> left(static_cast<size_t>(nd), 0);
  for (size_t k = 0; k < pad.size() / 2; ++k) left[size_t(nd - 1 - int64_t(k))] = pad[2 * k];
  const int64_t W = out.size(nd - 1), n_last = x.size(nd - 1), l_last = left[size_t(nd - 1)];
  const int64_t xs_last = x.stride(nd - 1), os_last = out.stride(nd - 1);
  // Output columns [mid_begin, mid_end) read source columns mid_begin - l_last onwards.
  const int64_t mid_begin = std::clamp<int64_t>(l_last, 0, W);
  const int64_t mid_end = std::clamp<int64_t>(l_last + n_last, mid_begin, W);
  const bool contiguous_rows = xs_last == 1 && os_last == 1;
  bool grows = true;  // no negative (cropping) pad
  for (int64_t p : pad) grows = grows && p >= 0;
  if (mode_id == 0 && grows && pad_two_dims(x, out, left, fill)) return;
  if (mode_id == 0 && grows && contiguous_rows && out.is_contiguous() && out.numel() > 0) {
    // Constant padding of a contiguous output: one threaded fill of the whole output, then
    // each source row copied to its place (no per-row source mapping of the padded rows;
    // [16, 64, 56, 56] bfloat16 padded by 1 took 1.07 ms row by row, PyTorch 0.17 ms).
    const int64_t n = out.numel(), pieces = n >= detail::kParallelElements ? 64 : 1;
    auto fill_piece = [&](int64_t p) {
      const int64_t b = n * p / pieces, e = n * (p + 1) / pieces;
      fill_row(o + b * int64_t(es), fill.bytes, e - b, es);
    };
    if (pieces > 1) detail::parallel_chunks(pieces, fill_piece);
    else fill_piece(0);
    int64_t base = 0;
    for (int64_t d = 0; d < nd; ++d) base += left[size_t(d)] * out.stride(d);
    // Byte strides of the output's outer dims, read per row.
    std::vector<int64_t> out_bytes(static_cast<size_t>(nd));
    for (int64_t d = 0; d < nd; ++d) out_bytes[size_t(d)] = out.stride(d) * int64_t(es);
    const int64_t* ob = out_bytes.data();
    char* const o_base = o + base * int64_t(es);
    const size_t row_bytes = size_t(n_last) * es;
    for_each_row(x.shape(), x.strides(), [&](const int64_t* c, int64_t src) {
      char* dst = o_base;
      for (int64_t d = 0; d + 1 < nd; ++d) dst += c[d] * ob[d];
      detail::copy_bytes(dst, s + src * int64_t(es), row_bytes);
    });
    return;
  }
  for_each_row(out.shape(), out.strides(), [&](const int64_t* c, int64_t row) {
    int64_t src = 0;
    bool filled = false;
    for (int64_t d = 0; d + 1 < nd; ++d) {
      const int64_t i = pad_source(c[d] - left[size_t(d)], x.size(d), mode_id);
      if (i < 0) {
        filled = true;
        break;
      }
      src += i * x.stride(d);
    }
    if (contiguous_rows && (filled || mode_id == 0)) {
      // Constant padding: fills and one memcpy per row.
      char* r = o + row * int64_t(es);
      if (filled) return fill_row(r, fill.bytes, W, es);
      fill_row(r, fill.bytes, mid_begin, es);
      detail::copy_bytes(r + mid_begin * int64_t(es),
                         s + (src + mid_begin - l_last) * int64_t(es),
                         size_t(mid_end - mid_begin) * es);
      return fill_row(r + mid_end * int64_t(es), fill.bytes, W - mid_end, es);
    }
    for (int64_t j = 0; j < W; ++j) {
      if (!filled && j == mid_begin && contiguous_rows && mid_end > mid_begin) {
        detail::copy_bytes(o + (row + j) * int64_t(es), s + (src + j - l_last) * int64_t(es),
                           size_t(mid_end - mid_begin) * es);
        j = mid_end - 1;
        continue;
      }
      const int64_t i = filled ? -1 : pad_source(j - l_last, n_last, mode_id);
      if (i < 0) copy_elem(o, row + j * os_last, fill.bytes, 0, es);
      else copy_elem(o, row + j * os_last, s, src + i * xs_last, es);
    }
  });
}

// inputs: int64 class indices; attrs: num_classes (-1: max + 1, dynamic shape).
void one_hot_kernel(OpCall& call) {
  const Tensor& x = call.inputs[0];
  int64_t c = call.int_attr(0);
  std::vector<int64_t> v;
  v.reserve(size_t(x.numel()));
  const int64_t* p = x.data_ptr<int64_t>();
  for_each_offset(x.shape(), {x.strides()},
                  [&](const int64_t* off, const int64_t*) { v.push_back(p[off[0]]); });
  for (int64_t e : v)
    KILN_CHECK(e >= 0, Error, "one_hot: Class values must be non-negative, got ", e);
  if (c < 0) {
    KILN_CHECK(!v.empty(), Error,
               "one_hot: Can not infer total number of classes from empty tensor.");
    c = *std::max_element(v.begin(), v.end()) + 1;
  }
  for (int64_t e : v)
    KILN_CHECK(e < c, Error, "one_hot: Class values must be smaller than num_classes (",
               c, "), got ", e);
  Shape s = x.shape();
  s.push_back(c);
  if (call.outs.empty()) call.outs = {empty_tensor(s, DType::I64, x.device())};
  const Tensor& out = call.outs[0];
  KILN_INTERNAL_ASSERT(out.shape() == s && out.is_contiguous(), "one_hot: bad output");
  int64_t* q = out.data_ptr<int64_t>();
  std::fill(q, q + out.numel(), int64_t(0));
  for (size_t i = 0; i < v.size(); ++i) q[int64_t(i) * c + v[i]] = 1;
}

}  // namespace

void register_shape_kernels() {
  register_kernel("cat", DeviceType::CPU, cat_kernel, kAllDTypes | kComplexDTypes);
  register_kernel("tril", DeviceType::CPU, tri_kernel<true>, kAllDTypes | kComplexDTypes);
  register_kernel("triu", DeviceType::CPU, tri_kernel<false>, kAllDTypes | kComplexDTypes);
  register_kernel("repeat", DeviceType::CPU, repeat_kernel, kAllDTypes | kComplexDTypes);
  register_kernel("repeat_interleave", DeviceType::CPU, repeat_interleave_kernel, kAllDTypes);
  register_kernel("flip", DeviceType::CPU, flip_kernel, kAllDTypes | kComplexDTypes);
  register_kernel("roll", DeviceType::CPU, roll_kernel, kAllDTypes | kComplexDTypes);
  register_kernel("pad", DeviceType::CPU, pad_kernel, kAllDTypes | kComplexDTypes);
  register_kernel("one_hot", DeviceType::CPU, one_hot_kernel, dtype_bit(DType::I64));
  register_kernel("one_hot.infer", DeviceType::CPU, one_hot_kernel, dtype_bit(DType::I64));
}

}  // namespace kiln::cpu
