#include "onednn_runtime.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>

#include "kiln/backends/cpu/cpu_info.h"

namespace kiln::cpu {

namespace {
// On unless KILN_ONEDNN=0 at start; switched by set_onednn_enabled.
std::atomic<bool>& onednn_switch() {
  static std::atomic<bool> on{[] {
    const char* v = std::getenv("KILN_ONEDNN");
    return !(v && std::strcmp(v, "0") == 0);
  }()};
  return on;
}
// On unless KILN_WINOGRAD=0 at start; switched by set_onednn_winograd_allowed.
std::atomic<bool>& winograd_switch() {
  static std::atomic<bool> on{[] {
    const char* v = std::getenv("KILN_WINOGRAD");
    return !(v && std::strcmp(v, "0") == 0);
  }()};
  return on;
}
}  // namespace

bool onednn_available() {
#ifdef KILN_HAVE_DNNL
  return true;
#else
  return false;
#endif
}

bool onednn_enabled() {
  return onednn_available() && onednn_switch().load(std::memory_order_relaxed);
}

void set_onednn_enabled(bool on) { onednn_switch().store(on, std::memory_order_relaxed); }

bool onednn_winograd_allowed() { return winograd_switch().load(std::memory_order_relaxed); }

void set_onednn_winograd_allowed(bool on) {
  winograd_switch().store(on, std::memory_order_relaxed);
}

#ifndef KILN_HAVE_DNNL

void onednn_apply_isa_cap() {}

#else

namespace {
dnnl::cpu_isa isa_for(IsaLevel level) {
  switch (level) {
    case IsaLevel::Baseline: return dnnl::cpu_isa::sse41;
    case IsaLevel::Avx2: return dnnl::cpu_isa::avx2;
    case IsaLevel::Avx512: return dnnl::cpu_isa::avx512_core;
    case IsaLevel::Avx512Vnni: return dnnl::cpu_isa::avx512_core_bf16;
    default: return dnnl::cpu_isa::all;
  }
}
}  // namespace

void onednn_apply_isa_cap() {
  static std::once_flag once;
  std::call_once(once, [] {
    // Fails (harmlessly) if oneDNN already dispatched; the cap then stays oneDNN's own.
    try {
      dnnl::set_max_cpu_isa(isa_for(isa_level()));
    } catch (const dnnl::error&) {
    }
  });
}

dnnl::engine& onednn_engine() {
  static dnnl::engine e = [] {
    onednn_apply_isa_cap();
    return dnnl::engine(dnnl::engine::kind::cpu, 0);
  }();
  return e;
}

dnnl::stream& onednn_stream() {
  thread_local dnnl::stream s(onednn_engine());
  return s;
}

void* onednn_thread_buffer(size_t need, OnednnBuffer slot) {
  struct Buffer {
    void* data = nullptr;
    size_t capacity = 0;
    ~Buffer() { std::free(data); }
  };
  thread_local Buffer buffers[int(OnednnBuffer::Count)];
  Buffer& buffer = buffers[int(slot)];
  if (need > buffer.capacity) {
    const size_t bytes = (need + 4095) / 4096 * 4096;  // a multiple of the alignment
    void* p = std::aligned_alloc(4096, bytes);
    if (!p) throw std::bad_alloc();
    std::free(buffer.data);
    buffer.data = p;
    buffer.capacity = bytes;
  }
  return buffer.data;
}

dnnl::memory onednn_thread_memory(const dnnl::memory::desc& desc, OnednnBuffer slot) {
  return dnnl::memory(desc, onednn_engine(), onednn_thread_buffer(desc.get_size(), slot));
}

dnnl::memory& onednn_bound_memory(const std::shared_ptr<const void>& plan, OnednnArg arg,
                                  const dnnl::memory::desc& desc, const void* data) {
  struct Entry {
    std::shared_ptr<const void> plan;
    dnnl::memory args[int(OnednnArg::Count)];
  };
  constexpr size_t kEntries = 8;
  thread_local Entry entries[kEntries];
  thread_local size_t next = 0;
  Entry* entry = nullptr;
  for (Entry& e : entries)
    if (e.plan == plan) entry = &e;
  if (!entry) {
    entry = &entries[next++ % kEntries];
    *entry = Entry{plan, {}};
  }
  dnnl::memory& m = entry->args[int(arg)];
  if (!m) m = dnnl::memory(desc, onednn_engine(), const_cast<void*>(data));
  else m.set_data_handle(const_cast<void*>(data));
  return m;
}

#endif  // KILN_HAVE_DNNL

}  // namespace kiln::cpu
