// The xpu backend: GPUs (or any OpenCL device KILN_XPU_DEVICE_TYPES admits) through OpenCL.
// Streams are in-order command queues, events are queue markers with profiling times, and
// memory is OpenCL buffers addressed as described in xpu_runtime.h.
#include <memory>

#include "kiln/core/error.h"
#include "kiln/runtime/backend.h"
#include "xpu_runtime.h"

namespace kiln::xpu {

namespace {

class XpuEvent final : public EventImpl {
 public:
  XpuEvent(int device, bool timing) : device_(device), timing_(timing) {}
  ~XpuEvent() override {
    if (event_) cl().clReleaseEvent(event_);
  }

  void record(const Stream& stream) override {
    cl_event e = nullptr;
    check_cl(cl().clEnqueueMarkerWithWaitList(XpuRuntime::get().queue(stream), 0, nullptr, &e),
             "clEnqueueMarkerWithWaitList");
    if (event_) cl().clReleaseEvent(event_);
    event_ = e;
  }
  void block(const Stream& stream) override {
    if (!event_) return;
    check_cl(cl().clEnqueueBarrierWithWaitList(XpuRuntime::get().queue(stream), 1, &event_, nullptr),
             "clEnqueueBarrierWithWaitList");
  }
  bool query() const override {
    if (!event_) return true;
    cl_int status = CL_COMPLETE;
    check_cl(cl().clGetEventInfo(event_, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof(status),
                                 &status, nullptr),
             "clGetEventInfo");
    KILN_CHECK(status >= 0, DeviceError, "xpu:", device_, ": the work before an event failed with ",
               cl_status_name(status));
    return status == CL_COMPLETE;
  }
  void synchronize() const override {
    if (event_) check_cl(cl().clWaitForEvents(1, &event_), "clWaitForEvents");
  }
  double elapsed_ms(const EventImpl& end) const override {
    return double(end.completion_time_ns() - completion_time_ns()) / 1e6;
  }
  int64_t completion_time_ns() const override {
    KILN_CHECK(timing_, Error, "xpu event: elapsed time needs an event created with "
               "enable_timing=true, got one without timing");
    KILN_CHECK(event_ != nullptr, Error, "xpu event: elapsed time needs a recorded event, got "
               "one that was never recorded");
    synchronize();
    cl_ulong t = 0;
    check_cl(cl().clGetEventProfilingInfo(event_, CL_PROFILING_COMMAND_END, sizeof(t), &t, nullptr),
             "clGetEventProfilingInfo");
    return int64_t(t);  // the device's clock, in ns: only differences are meaningful
  }

 private:
  int device_;
  bool timing_;
  cl_event event_ = nullptr;
};

class XpuBackend final : public Backend {
 public:
  DeviceType type() const override { return DeviceType::XPU; }
  int device_count() const noexcept override { return XpuRuntime::get().device_count(); }

  DeviceProperties properties(int device_index) const override {
    const DeviceInfo& d = XpuRuntime::get().info(device_index);
    DeviceProperties p;
    p.name = d.name;
    p.total_memory = d.global_memory;
    p.capabilities = "OpenCL: " + d.platform_name + ", " + d.version + ", driver " + d.driver +
                     ", " + std::to_string(d.compute_units) + " compute units" +
                     (d.fp64 ? ", fp64" : "");
    return p;
  }

  int64_t create_stream(int device_index) override {
    return XpuRuntime::get().create_stream(device_index);
  }
  bool stream_query(const Stream& s) override {
    // A marker's state tells whether everything queued before it has finished.
    XpuEvent probe(s.device.index, false);
    probe.record(s);
    cl().clFlush(XpuRuntime::get().queue(s));
    return probe.query();
  }
  void stream_synchronize(const Stream& s) override {
    check_cl(cl().clFinish(XpuRuntime::get().queue(s)), "clFinish");
  }
  void launch(const Stream& s, std::function<void()> fn) override {
    // Host work ordered after the stream's queued work: wait for it, then run (the runtime
    // uses this to keep host buffers of non-blocking copies alive).
    stream_synchronize(s);
    fn();
  }

  std::unique_ptr<EventImpl> create_event(int device_index, bool enable_timing) override {
    XpuRuntime::get().info(device_index);  // validates the index
    return std::make_unique<XpuEvent>(device_index, enable_timing);
  }

  void* raw_allocate(int device_index, size_t nbytes) override {
    return XpuRuntime::get().allocate(device_index, nbytes);
  }
  void raw_free(int device_index, void* ptr) override { XpuRuntime::get().free(device_index, ptr); }

  void copy_async(void* dst, const void* src, size_t nbytes, CopyKind kind, const Stream& s) override {
    if (nbytes == 0) return;
    XpuRuntime& rt = XpuRuntime::get();
    cl_command_queue q = rt.queue(s);
    auto device_side = [&](const void* p, const char* which) {
      BufferRef b = rt.resolve(p);
      KILN_CHECK(b.size >= nbytes, DeviceError, "xpu copy: ", which, " has ", b.size,
                 " bytes left in its buffer, expected at least ", nbytes);
      return b;
    };
    switch (kind) {
      case CopyKind::HostToDevice: {
        BufferRef d = device_side(dst, "destination");
        check_cl(cl().clEnqueueWriteBuffer(q, d.mem, CL_FALSE, d.offset, nbytes, src, 0, nullptr, nullptr),
                 "clEnqueueWriteBuffer");
        break;
      }
      case CopyKind::DeviceToHost: {
        BufferRef sr = device_side(src, "source");
        check_cl(cl().clEnqueueReadBuffer(q, sr.mem, CL_FALSE, sr.offset, nbytes, dst, 0, nullptr, nullptr),
                 "clEnqueueReadBuffer");
        break;
      }
      case CopyKind::DeviceToDevice: {
        BufferRef d = device_side(dst, "destination"), sr = device_side(src, "source");
        check_cl(cl().clEnqueueCopyBuffer(q, sr.mem, d.mem, sr.offset, d.offset, nbytes, 0, nullptr, nullptr),
                 "clEnqueueCopyBuffer");
        break;
      }
    }
    cl().clFlush(q);
  }
};

}  // namespace

}  // namespace kiln::xpu

namespace kiln::detail {
// Registered even without an OpenCL loader or device: it then has no devices, and using
// one says why (XpuRuntime::why_no_devices).
std::unique_ptr<Backend> make_xpu_backend() { return std::make_unique<xpu::XpuBackend>(); }
}  // namespace kiln::detail
