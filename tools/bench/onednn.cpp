// oneDNN peer for `kiln bench` (see onednn.h). Built only when CMake finds libdnnl
// (KILN_BENCH_HAVE_DNNL); otherwise every call reports that oneDNN is absent.
#include "tools/bench/onednn.h"

#include "src/kiln/backends/cpu/onednn_runtime.h"

#include <stdexcept>

#ifdef KILN_BENCH_HAVE_DNNL
#include <oneapi/dnnl/dnnl.h>
#endif

namespace kiln::tools::bench {

#ifdef KILN_BENCH_HAVE_DNNL
namespace {

void check(dnnl_status_t s, const char* what) {
  if (s != dnnl_success)
    throw std::runtime_error(std::string("oneDNN: ") + what + " failed (status " +
                             std::to_string(int(s)) + ")");
}

struct Engine {
  dnnl_engine_t engine = nullptr;
  dnnl_stream_t stream = nullptr;
  Engine() {
    // The same ISA cap as kiln's own oneDNN calls (KILN_CPU_ISA), before the first primitive.
    kiln::cpu::onednn_apply_isa_cap();
    check(dnnl_engine_create(&engine, dnnl_cpu, 0), "engine_create");
    check(dnnl_stream_create(&stream, engine, dnnl_stream_default_flags), "stream_create");
  }
};

Engine& engine() {
  static Engine e;
  return e;
}

dnnl_data_type_t to_dnnl(DnnlType t) {
  switch (t) {
    case DnnlType::F32: return dnnl_f32;
    case DnnlType::BF16: return dnnl_bf16;
    case DnnlType::U8: return dnnl_u8;
    case DnnlType::S8: return dnnl_s8;
    case DnnlType::S32: return dnnl_s32;
  }
  return dnnl_f32;
}

}  // namespace

bool onednn_available() { return true; }

std::string onednn_version() {
  const dnnl_version_t* v = dnnl_version();
  return std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch);
}

void onednn_sgemm(int64_t M, int64_t N, int64_t K, const float* A, const float* B,
                  bool b_transposed, float* C) {
  check(dnnl_sgemm('N', b_transposed ? 'T' : 'N', M, N, K, 1.0f, A, K, B, b_transposed ? K : N,
                   0.0f, C, N),
        "sgemm");
}

struct OnednnMatmul::Impl {
  dnnl_primitive_t prim = nullptr;
  dnnl_memory_t src = nullptr, wei = nullptr, dst = nullptr;
  std::string impl;
  ~Impl() {
    if (prim) dnnl_primitive_destroy(prim);
    if (src) dnnl_memory_destroy(src);
    if (wei) dnnl_memory_destroy(wei);
    if (dst) dnnl_memory_destroy(dst);
  }
};

OnednnMatmul::OnednnMatmul(int64_t M, int64_t N, int64_t K, DnnlType src, DnnlType wei,
                           DnnlType dst, const void* weights, bool b_transposed)
    : impl_(std::make_unique<Impl>()) {
  Engine& e = engine();
  dnnl_dims_t a_dims = {M, K}, b_dims = {K, N}, c_dims = {M, N};
  dnnl_memory_desc_t a_md, b_any, b_plain, c_md;
  check(dnnl_memory_desc_init_by_tag(&a_md, 2, a_dims, to_dnnl(src), dnnl_ab), "md a");
  check(dnnl_memory_desc_init_by_tag(&b_any, 2, b_dims, to_dnnl(wei), dnnl_format_tag_any), "md b");
  check(dnnl_memory_desc_init_by_tag(&b_plain, 2, b_dims, to_dnnl(wei),
                                     b_transposed ? dnnl_ba : dnnl_ab),
        "md b plain");
  check(dnnl_memory_desc_init_by_tag(&c_md, 2, c_dims, to_dnnl(dst), dnnl_ab), "md c");
  dnnl_matmul_desc_t desc;
  check(dnnl_matmul_desc_init(&desc, &a_md, &b_any, nullptr, &c_md), "matmul_desc_init");
  dnnl_primitive_desc_t pd;
  check(dnnl_primitive_desc_create(&pd, &desc, nullptr, e.engine, nullptr), "matmul pd");
  const char* info = nullptr;
  dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &info);
  impl_->impl = info ? info : "?";
  const dnnl_memory_desc_t* wmd = dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
  // Prepack: reorder the plain weights into the primitive's layout, once.
  dnnl_memory_t plain;
  check(dnnl_memory_create(&plain, &b_plain, e.engine, const_cast<void*>(weights)), "mem plain");
  check(dnnl_memory_create(&impl_->wei, wmd, e.engine, DNNL_MEMORY_ALLOCATE), "mem wei");
  dnnl_primitive_desc_t rpd;
  check(dnnl_reorder_primitive_desc_create(&rpd, &b_plain, e.engine, wmd, e.engine, nullptr),
        "reorder pd");
  dnnl_primitive_t reorder;
  check(dnnl_primitive_create(&reorder, rpd), "reorder");
  dnnl_exec_arg_t rargs[2] = {{DNNL_ARG_FROM, plain}, {DNNL_ARG_TO, impl_->wei}};
  check(dnnl_primitive_execute(reorder, e.stream, 2, rargs), "reorder run");
  check(dnnl_stream_wait(e.stream), "wait");
  dnnl_primitive_destroy(reorder);
  dnnl_primitive_desc_destroy(rpd);
  dnnl_memory_destroy(plain);
  check(dnnl_primitive_create(&impl_->prim, pd), "matmul");
  dnnl_primitive_desc_destroy(pd);
  check(dnnl_memory_create(&impl_->src, &a_md, e.engine, DNNL_MEMORY_NONE), "mem src");
  check(dnnl_memory_create(&impl_->dst, &c_md, e.engine, DNNL_MEMORY_NONE), "mem dst");
}

OnednnMatmul::~OnednnMatmul() = default;

void OnednnMatmul::run(const void* src, void* dst) {
  Engine& e = engine();
  check(dnnl_memory_set_data_handle(impl_->src, const_cast<void*>(src)), "set src");
  check(dnnl_memory_set_data_handle(impl_->dst, dst), "set dst");
  dnnl_exec_arg_t args[3] = {
      {DNNL_ARG_SRC, impl_->src}, {DNNL_ARG_WEIGHTS, impl_->wei}, {DNNL_ARG_DST, impl_->dst}};
  check(dnnl_primitive_execute(impl_->prim, e.stream, 3, args), "matmul run");
  check(dnnl_stream_wait(e.stream), "wait");
}

std::string OnednnMatmul::impl() const { return impl_->impl; }

#else  // no oneDNN

bool onednn_available() { return false; }
std::string onednn_version() { return "not built (libdnnl-dev missing)"; }
void onednn_sgemm(int64_t, int64_t, int64_t, const float*, const float*, bool, float*) {
  throw std::runtime_error("oneDNN not built");
}
struct OnednnMatmul::Impl {};
OnednnMatmul::OnednnMatmul(int64_t, int64_t, int64_t, DnnlType, DnnlType, DnnlType, const void*,
                           bool) {
  throw std::runtime_error("oneDNN not built");
}
OnednnMatmul::~OnednnMatmul() = default;
void OnednnMatmul::run(const void*, void*) {}
std::string OnednnMatmul::impl() const { return ""; }

#endif

}  // namespace kiln::tools::bench
