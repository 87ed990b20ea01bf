// `kiln bench --sections xpu`: the xpu (OpenCL) backend's throughput. Each timed call queues
// `reps` ops and waits for the device once, so the figure is device time plus 1/reps of one
// host round trip. benchmarks/xpu_vs_torch.py runs this and PyTorch on the same device
// kind (CUDA where present) and prints the ratios.
#include <cstring>
#include <iomanip>
#include <iostream>
#include <random>

#include "kiln/core/half.h"
#include "kiln/kiln.h"
#include "kiln/quant/ggml_linear.h"
#include "kiln/nn/functional.h"
#include "kiln/ops/conv.h"
#include "kiln/runtime/backend.h"
#include "tools/bench/bench.h"

namespace kiln::tools::bench {

void bench_xpu(const Options& opt, Report& rep) {
  if (!is_available(DeviceType::XPU)) {
    std::cout << "\n== xpu: no xpu device (set KILN_XPU_DEVICE_TYPES=all for a CPU OpenCL driver)\n";
    return;
  }
  const Device dev(DeviceType::XPU, 0);
  std::cout << "\n== xpu (" << get_backend(DeviceType::XPU).properties(0).name << ")\n";
  const int reps = opt.quick ? 2 : 10;
  auto timed = [&](const std::function<void()>& fn) {
    return time_interleaved({[&] {
                               for (int r = 0; r < reps; ++r) fn();
                               synchronize_device(dev);
                             }},
                            opt, 2)[0].median / reps;
  };
  auto record = [&](const std::string& name, const std::string& metric, const std::string& unit,
                    double value) {
    Record r;
    r.section = "xpu";
    r.name = name;
    r.system = "kiln-xpu";
    r.metric = metric;
    r.unit = unit;
    r.value = value;
    rep.add(r);
    std::cout << "  " << std::left << std::setw(28) << name << std::right << std::setw(12)
              << std::fixed << std::setprecision(2) << value << " " << unit << "\n";
  };
  std::vector<int64_t> sizes = opt.quick ? std::vector<int64_t>{128} : std::vector<int64_t>{1024, 2048, 4096};
  for (DType t : {DType::F32, DType::BF16}) {
    for (int64_t n : sizes) {
      Tensor a = randn({n, n}).to(t).to(dev), b = randn({n, n}).to(t).to(dev);
      Tensor c;
      double s = timed([&] { c = matmul(a, b); });
      record("matmul " + std::string(dtype_name(t)) + " " + std::to_string(n), "throughput",
             "TFLOP/s", 2.0 * double(n) * double(n) * double(n) / s / 1e12);
    }
    // Decoding's shape: one row times a [K, N] weight read as W.t() (as Linear does).
    const int64_t K = opt.quick ? 256 : 4096, N = opt.quick ? 256 : 11008;
    Tensor x = randn({1, K}).to(t).to(dev), w = randn({N, K}).to(t).to(dev);
    Tensor y;
    double s = timed([&] { y = matmul(x, w.t()); });
    record("linear M=1 " + std::string(dtype_name(t)) + " " + std::to_string(K) + "x" + std::to_string(N),
           "weight bandwidth", "GB/s", double(N * K) * double(element_size(t)) / s / 1e9);
  }
  // Decoding and prefill over ggml block weights kept on the device (random blocks with
  // small float16 scales): M=1 as weight bandwidth, M=128 (dequantise + GEMM) as throughput.
  for (quant::GGMLType type : {quant::GGMLType::Q8_0, quant::GGMLType::Q4_K, quant::GGMLType::Q6_K}) {
    const int64_t K = opt.quick ? 256 : 4096, N = opt.quick ? 256 : 11008;
    const quant::GGMLTypeInfo& ti = quant::ggml_type_info(type);
    const int64_t row_bytes = quant::ggml_row_bytes(type, K);
    std::vector<uint8_t> blocks(size_t(N * row_bytes));
    std::mt19937 rng(1);
    for (auto& v : blocks) v = uint8_t(rng());
    const size_t scale_at = type == quant::GGMLType::Q6_K ? 208 : 0;  // d (and Q4_K's dmin at 2)
    const uint16_t small = Half::from_float(1e-3f);
    for (size_t b = 0; b < blocks.size(); b += size_t(ti.block_bytes)) {
      std::memcpy(&blocks[b + scale_at], &small, 2);
      if (type == quant::GGMLType::Q4_K) std::memcpy(&blocks[b + 2], &small, 2);
    }
    Tensor w = from_blob_copy(blocks.data(), {N, row_bytes}, DType::U8, Device(DeviceType::CPU, 0)).to(dev);
    Tensor x1 = randn({1, K}).to(dev), xm = randn({128, K}).to(dev), y;
    const std::string shape = std::to_string(K) + "x" + std::to_string(N);
    double s = timed([&] { y = quant::ggml_linear(x1, w, type, K); });
    record("ggml_linear " + std::string(ti.name) + " M=1 " + shape, "weight bandwidth", "GB/s",
           double(w.nbytes()) / s / 1e9);
    s = timed([&] { y = quant::ggml_linear(xm, w, type, K); });
    record("ggml_linear " + std::string(ti.name) + " M=128 " + shape, "throughput", "TFLOP/s",
           2.0 * 128 * double(N) * double(K) / s / 1e12);
  }
  // A ResNet stage's 3x3 convolution (stride 1, padding 1), NCHW.
  for (DType t : {DType::F32, DType::BF16}) {
    const int64_t N = opt.quick ? 2 : 16, C = 64, HW = opt.quick ? 14 : 56;
    Tensor x = randn({N, C, HW, HW}).to(t).to(dev), w = randn({C, C, 3, 3}).to(t).to(dev), y;
    ConvOptions o;
    o.padding = {1, 1};
    double s = timed([&] { y = convolution(x, w, Tensor(), o); });
    record("conv2d " + std::string(dtype_name(t)) + " " + std::to_string(N) + "x64x" + std::to_string(HW) + "x" +
               std::to_string(HW) + " k3",
           "throughput", "TFLOP/s", 2.0 * double(N * C * HW * HW) * double(C * 9) / s / 1e12);
  }
  const int64_t n = opt.quick ? (1 << 16) : (int64_t(1) << 26);
  const int64_t cols = 4096, rows = n / cols;
  Tensor x = randn({rows, cols}).to(dev), y = randn({rows, cols}).to(dev), out = empty({rows, cols}, TensorOptions(DType::F32, dev));
  Tensor w = randn({cols}).to(dev), bias = randn({cols}).to(dev), keep;
  const double eb = 4.0 * double(n);
  const std::string size = opt.quick ? "64K" : "64M";
  record("copy float32 " + size, "bandwidth", "GB/s", 2 * eb / timed([&] { copy_(out, x); }) / 1e9);
  record("add float32 " + size, "bandwidth", "GB/s", 3 * eb / timed([&] { add_out(x, y, out); }) / 1e9);
  record("gelu float32 " + size, "bandwidth", "GB/s", 2 * eb / timed([&] { keep = gelu(x); }) / 1e9);
  record("sum float32 " + size, "bandwidth", "GB/s", eb / timed([&] { keep = sum(x); }) / 1e9);
  record("softmax float32 " + size + " rows of 4096", "bandwidth", "GB/s", 2 * eb / timed([&] { keep = softmax(x, -1); }) / 1e9);
  record("layer_norm float32 " + size + " rows of 4096", "bandwidth", "GB/s",
         2 * eb / timed([&] { keep = nn::functional::layer_norm(x, {cols}, w, bias); }) / 1e9);
  Tensor small = randn({16}).to(dev);
  record("add 16 elements (latency)", "time per op", "us",
         1e6 * timed([&] { keep = add(small, small); }));
}

}  // namespace kiln::tools::bench
