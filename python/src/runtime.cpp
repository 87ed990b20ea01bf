// kiln.dtype, kiln.device, kiln.Generator, kiln.Stream, kiln.Event and the device and memory
// helpers (device_count, synchronize, memory_stats, empty_cache).
#include <nanobind/stl/pair.h>

#include <random>

#include "kiln/backends/cpu/cpu_info.h"
#include "kiln/backends/cpu/onednn.h"
#include "bind.h"
#include "kiln/dispatch/dispatcher.h"
#include "kiln/runtime/backend.h"
#include "kiln/runtime/profiler.h"
#include "kiln/runtime/threads.h"
#include "kiln/core/determinism.h"
#include "kiln/dispatch/autocast.h"
#include "kiln/tensor/print_options.h"

namespace kiln::py {

namespace {
PyObject* g_dtype_objects[kNumDTypes] = {};
PyTypeObject* g_dtype_type = nullptr;

uint64_t seed_from_handle(nb::handle h) {
  KILN_CHECK(PyLong_Check(h.ptr()) && !PyBool_Check(h.ptr()), TypeError,
             "manual_seed expected an int, got ", Py_TYPE(h.ptr())->tp_name);
  unsigned long long v = PyLong_AsUnsignedLongLongMask(h.ptr());  // -1 -> 2**64-1, as torch
  if (PyErr_Occurred()) throw nb::python_error();
  return v;
}

std::string device_repr(const Device& d) {
  std::string s = "device(type='" + std::string(device_type_name(d.type)) + "'";
  if (d.has_index()) s += ", index=" + std::to_string(d.index);
  return s + ")";
}

Device device_or_current(std::optional<Device> d, DeviceType fallback) {
  return resolve_device(d ? *d : Device(fallback));
}
}  // namespace

PyObject* dtype_object(DType t) { return g_dtype_objects[int(t)]; }
PyTypeObject* dtype_type() { return g_dtype_type; }

void bind_runtime(nb::module_& m) {
  // ---- dtype
  auto dt = nb::class_<PyDType>(m, "dtype")
                .def_prop_ro("is_floating_point",
                             [](const PyDType& d) { return is_floating(d.value); })
                .def_prop_ro("is_signed", [](const PyDType& d) { return is_signed(d.value); })
                .def_prop_ro("is_complex", [](const PyDType& d) { return is_complex(d.value); })
                .def_prop_ro("itemsize",
                             [](const PyDType& d) { return element_size(d.value); })
                .def("__repr__",
                     [](const PyDType& d) { return "kiln." + std::string(dtype_name(d.value)); })
                .def("__reduce__", [](const PyDType& d) { return std::string(dtype_name(d.value)); });
  g_dtype_type = (PyTypeObject*)dt.ptr();
  nb::list all;
  for (int i = 0; i < kNumDTypes; ++i) {
    DType t = DType(i);
    nb::object o = nb::cast(PyDType{t});
    g_dtype_objects[i] = o.ptr();  // borrowed: the module keeps the objects alive
    m.attr(std::string(dtype_name(t)).c_str()) = o;
    all.append(o);
  }
  m.attr("_all_dtypes") = nb::tuple(all);
  m.def("get_default_dtype", [] { return default_float_dtype(); });
  m.def("set_default_dtype", [](DType t) {
    KILN_CHECK(is_floating(t), TypeError,
               "only floating-point types are supported as the default type");
    set_default_float_dtype(t);
  }, nb::arg("d"));
  // torch.set_printoptions' state (python/kiln/__init__.py applies the profiles); sci_mode
  // -1 chooses per tensor.
  m.def("_set_print_options", [](int precision, int64_t threshold, int64_t edgeitems,
                                 int64_t linewidth, int sci_mode) {
    KILN_CHECK(precision >= 0 && precision <= 100 && threshold >= 0 && edgeitems >= 0 &&
                   linewidth >= 1,
               ValueError, "set_printoptions: expected precision in [0, 100], threshold >= 0, "
               "edgeitems >= 0 and linewidth >= 1, got ", precision, ", ", threshold, ", ",
               edgeitems, ", ", linewidth);
    PrintOptions o{precision, threshold, edgeitems, linewidth, std::nullopt};
    if (sci_mode >= 0) o.sci_mode = sci_mode != 0;
    set_print_options(o);
  });
  m.def("_get_print_options", [] {
    const PrintOptions o = print_options();
    return nb::make_tuple(o.precision, o.threshold, o.edgeitems, o.linewidth,
                          o.sci_mode ? int(*o.sci_mode) : -1);
  });
  // torch.autocast's state (python/kiln/amp.py); device types by name.
  auto device_type = [](const std::string& name) {
    KILN_CHECK(name != "cuda" && name != "mps", DeviceError, "autocast: device type '", name,
               "' is not available in kiln (cpu, xpu)");
    return device_type_from_name(name);
  };
  m.def("_autocast_is_enabled", [device_type](const std::string& d) {
    return is_autocast_enabled(device_type(d)); });
  m.def("_autocast_set_enabled", [device_type](const std::string& d, bool on) {
    set_autocast_enabled(device_type(d), on); });
  m.def("_autocast_get_dtype", [device_type](const std::string& d) {
    return get_autocast_dtype(device_type(d)); });
  m.def("_autocast_set_dtype", [device_type](const std::string& d, DType t) {
    set_autocast_dtype(device_type(d), t); });
  m.def("_autocast_cache_enabled", &is_autocast_cache_enabled);
  m.def("_autocast_set_cache_enabled", &set_autocast_cache_enabled);
  m.def("_autocast_increment_nesting", &increment_autocast_nesting);
  m.def("_autocast_decrement_nesting", &decrement_autocast_nesting);
  m.def("clear_autocast_cache", &clear_autocast_cache);
  m.def("_set_deterministic_algorithms", [](bool on) { set_deterministic_algorithms(on); });
  m.def("_deterministic_algorithms", [] { return deterministic_algorithms(); });
  m.def("promote_types", [](DType a, DType b) { return promote_types(a, b); });
  m.def("can_cast", [](DType from, DType to) { return kiln::can_cast(from, to); },
        nb::arg("from_"), nb::arg("to"));

  // ---- device
  nb::class_<Device>(m, "device")
      // torch's signature: device("cpu"), device("xpu:1"), device("xpu", 1), and the same
      // with keywords (device(type="cpu", index=0)), which is how a device's repr reads back.
      .def("__init__", [](Device* d, const std::string& type, std::optional<int> index) {
        if (!index) {
          new (d) Device(Device::parse(type));
          return;
        }
        if (type.find(':') != std::string::npos)
          throw std::runtime_error(("type (string) must not include an index because index was "
                                 "passed explicitly: " + type).c_str());
        if (*index < 0)
          throw std::runtime_error("Device index must not be negative, got " +
                                   std::to_string(*index));
        new (d) Device(device_type_from_name(type), *index);
      }, nb::arg("type"), nb::arg("index") = nb::none())
      .def("__init__", [](Device* d, const Device& other) { new (d) Device(other); })
      .def_prop_ro("type", [](const Device& d) { return std::string(device_type_name(d.type)); })
      .def_prop_ro("index", [](const Device& d) -> std::optional<int> {
        return d.has_index() ? std::optional<int>(d.index) : std::nullopt;
      })
      .def("__repr__", &device_repr)
      .def("__str__", &Device::str)
      .def("__eq__", [](const Device& a, const Device& b) { return a == b; }, nb::is_operator())
      .def("__ne__", [](const Device& a, const Device& b) { return a != b; }, nb::is_operator())
      .def("__hash__", [](const Device& d) { return std::hash<Device>()(d); });
  nb::implicitly_convertible<std::string, Device>();

  // ---- Generator
  nb::class_<Generator>(m, "Generator")
      .def("__init__", [](Generator* g, std::optional<Device>) { new (g) Generator(); },
           nb::arg("device") = nb::none())
      .def("manual_seed", [](nb::handle_t<Generator> self, nb::handle seed) {
        nb::cast<Generator&>(self).manual_seed(seed_from_handle(seed));
        return nb::borrow(self);
      }, nb::arg("seed"))
      .def("initial_seed", &Generator::seed)
      .def("seed", [](Generator& g) {
        uint64_t s = (uint64_t(std::random_device{}()) << 32) ^ std::random_device{}();
        g.manual_seed(s);
        return s;
      })
      .def("get_offset", &Generator::offset)
      .def("set_offset", &Generator::set_offset)
      .def("get_state", [](const Generator& g) {
        Generator::State s = g.state();
        return tensor_from<int64_t>({int64_t(s.seed), int64_t(s.offset)}, DType::I64);
      })
      .def("set_state", [](nb::handle_t<Generator> self, const Tensor& state) {
        KILN_CHECK(state.numel() == 2 && state.dtype() == DType::I64, TypeError,
                   "set_state expects the int64 tensor returned by get_state()");
        auto v = state.to_vector<int64_t>();
        nb::cast<Generator&>(self).set_state({uint64_t(v[0]), uint64_t(v[1])});
        return nb::borrow(self);
      });
  m.attr("default_generator") = nb::cast(&default_generator(), nb::rv_policy::reference);
  m.def("manual_seed", [](nb::handle seed) {
    kiln::manual_seed(seed_from_handle(seed));
    return &default_generator();
  }, nb::arg("seed"), nb::rv_policy::reference);
  m.def("initial_seed", [] { return default_generator().seed(); });
  m.def("seed", [] {
    uint64_t s = (uint64_t(std::random_device{}()) << 32) ^ std::random_device{}();
    kiln::manual_seed(s);
    return s;
  });

  // ---- Stream / Event
  nb::class_<Stream>(m, "Stream")
      .def("__init__", [](Stream* s, std::optional<Device> device) {
        new (s) Stream(new_stream(device ? *device : Device(DeviceType::CPU)));
      }, nb::arg("device") = nb::none())
      .def_prop_ro("device", [](const Stream& s) { return s.device; })
      .def_ro("stream_id", &Stream::id)
      .def("query", &Stream::query)
      .def("synchronize", &Stream::synchronize, nb::call_guard<nb::gil_scoped_release>())
      .def("wait_stream", [](const Stream& self, const Stream& other) {
        Event e(other.device.type);
        e.record(other);
        e.wait(self);
      })
      .def("__eq__", [](const Stream& a, const Stream& b) { return a == b; }, nb::is_operator())
      .def("__repr__", [](const Stream& s) {
        return "<kiln.Stream device=" + s.device.str() + " stream_id=" + std::to_string(s.id) + ">";
      });
  m.def("current_stream", [](std::optional<Device> d) {
    return current_stream(device_or_current(d, DeviceType::CPU));
  }, nb::arg("device") = nb::none());
  m.def("default_stream", [](std::optional<Device> d) {
    return default_stream(device_or_current(d, DeviceType::CPU));
  }, nb::arg("device") = nb::none());
  m.def("set_stream", [](const Stream& s) { set_current_stream(s); });

  nb::class_<Event>(m, "Event")
      .def("__init__", [](Event* e, std::optional<Device> device, bool enable_timing) {
        new (e) Event(device ? device->type : DeviceType::CPU, enable_timing);
      }, nb::arg("device") = nb::none(), nb::arg("enable_timing") = false)
      .def("record", [](Event& e, std::optional<Stream> s) {
        if (s) e.record(*s);
        else e.record();
      }, nb::arg("stream") = nb::none())
      .def("wait", [](Event& e, std::optional<Stream> s) {
        e.wait(s ? *s : current_stream(Device(e.device_type())));
      }, nb::arg("stream") = nb::none())
      .def("query", &Event::query)
      .def("synchronize", &Event::synchronize, nb::call_guard<nb::gil_scoped_release>())
      .def("elapsed_time", &Event::elapsed_time);

  // ---- CPU threads (torch.set_num_threads / get_num_threads)
  // Op-level profiler (kiln.profiler wraps these).
  m.def("_profiler_start", [](bool trace, bool record_shapes, int64_t max_events) {
    profiler::start({trace, record_shapes, max_events});
  }, nb::arg("trace") = false, nb::arg("record_shapes") = false, nb::arg("max_events") = 0);
  // The traced calls as tuples (name, device, start_ns, duration_ns, thread, sequence,
  // input_shapes, input_dtypes, output_shapes); shapes are lists of tuples.
  m.def("_profiler_events", [] {
    auto shapes = [](const std::vector<std::vector<int64_t>>& v) {
      nb::list l;
      for (const auto& s : v) {
        nb::list dims;
        for (int64_t d : s) dims.append(d);
        l.append(nb::tuple(dims));
      }
      return l;
    };
    nb::list rows;
    for (const auto& e : profiler::events()) {
      nb::list dtypes;
      for (const auto& d : e.input_dtypes) dtypes.append(d);
      rows.append(nb::make_tuple(e.name, e.device, e.start_ns, e.duration_ns, e.thread,
                                 e.sequence, shapes(e.input_shapes), dtypes,
                                 shapes(e.output_shapes)));
    }
    return rows;
  });
  m.def("_profiler_dropped_events", [] { return profiler::dropped_events(); });
  m.def("_profiler_stop", [] { profiler::stop(); });
  m.def("_profiler_enabled", [] { return profiler::is_enabled(); });
  m.def("_profiler_stats", [] {
    nb::list rows;
    for (const auto& s : profiler::stats())
      rows.append(nb::make_tuple(s.name, s.device, s.calls, s.total_us, s.max_us));
    return rows;
  });
  m.def("_profiler_table", [](int row_limit) { return profiler::table(row_limit); },
        nb::arg("row_limit") = 0);
  // ---- CPU instruction-set level and the oneDNN switch (kiln.backends.cpu / .onednn)
  m.def("_cpu_isa_level", [] { return cpu::isa_level_name(cpu::isa_level()); });
  m.def("_cpu_detected_isa_level", [] { return cpu::isa_level_name(cpu::detected_isa_level()); });
  m.def("_cpu_features", [] { return cpu::cpu_features().names(); });
  m.def("_cpu_model_name", [] { return cpu::cpu_features().model_name; });
  m.def("_onednn_available", [] { return cpu::onednn_available(); });
  m.def("_onednn_enabled", [] { return cpu::onednn_enabled(); });
  m.def("_set_onednn_enabled", [](bool on) { cpu::set_onednn_enabled(on); }, nb::arg("on"));
  m.def("_onednn_winograd_allowed", [] { return cpu::onednn_winograd_allowed(); });
  m.def("_set_onednn_winograd_allowed", [](bool on) { cpu::set_onednn_winograd_allowed(on); },
        nb::arg("on"));
  m.def("set_num_threads", [](int n) { kiln::set_num_threads(n); }, nb::arg("int"));
  m.def("set_flush_denormal", [](bool on) { return kiln::set_flush_denormal(on); }, nb::arg("mode"));
  m.def("set_num_interop_threads", [](int n) { kiln::set_num_interop_threads(n); }, nb::arg("int"));
  m.def("get_num_interop_threads", [] { return kiln::get_num_interop_threads(); });
  m.def("get_num_threads", [] { return kiln::get_num_threads(); });

  // ---- devices and memory
  m.def("device_count", [](const std::string& type) {
    Backend* b = find_backend(device_type_from_name(type));
    return b ? b->device_count() : 0;
  }, nb::arg("type") = "testing");
  // KILN_FALLBACK=cpu at run time, and how many op calls took it (tests check that a model
  // ran on its device without any).
  m.def("_set_cpu_fallback_enabled", [](bool on) { set_cpu_fallback_enabled(on); }, nb::arg("on"));
  m.def("_total_fallback_calls", [] { return total_fallback_calls(); });
  m.def("_device_properties", [](const Device& d) {
    Device dev = resolve_device(d);
    DeviceProperties p = get_backend(dev.type).properties(dev.index);
    nb::dict r;
    r["name"] = p.name;
    r["total_memory"] = p.total_memory;
    r["capabilities"] = p.capabilities;
    return r;
  }, nb::arg("device"));
  m.def("is_available", [](const std::string& type) {
    return kiln::is_available(device_type_from_name(type));
  }, nb::arg("type"));
  m.def("current_device", [](const std::string& type) {
    return current_device_index(device_type_from_name(type));
  }, nb::arg("type") = "testing");
  m.def("set_device", [](const Device& d) {
    set_current_device_index(d.type, d.has_index() ? d.index : 0);
  }, nb::arg("device"));
  m.def("synchronize", [](std::optional<Device> d) {
    Device dev = device_or_current(d, DeviceType::CPU);
    nogil([&] { synchronize_device(dev); });
  }, nb::arg("device") = nb::none());
  m.def("memory_stats", [](const Device& d) {
    MemoryStats s = allocator_for(resolve_device(d)).stats();
    nb::dict r;
    r["allocated_bytes"] = s.allocated_bytes;
    r["reserved_bytes"] = s.reserved_bytes;
    r["peak_allocated_bytes"] = s.peak_allocated_bytes;
    r["num_allocs"] = s.num_allocs;
    r["num_frees"] = s.num_frees;
    r["num_raw_allocs"] = s.num_raw_allocs;
    r["num_cache_hits"] = s.num_cache_hits;
    r["memory_limit"] = s.memory_limit;
    return r;
  }, nb::arg("device"));
  m.def("memory_allocated", [](const Device& d) {
    return allocator_for(resolve_device(d)).stats().allocated_bytes;
  }, nb::arg("device"));
  m.def("max_memory_allocated", [](const Device& d) {
    return allocator_for(resolve_device(d)).stats().peak_allocated_bytes;
  }, nb::arg("device"));
  m.def("memory_reserved", [](const Device& d) {
    return allocator_for(resolve_device(d)).stats().reserved_bytes;
  }, nb::arg("device"));
  m.def("reset_peak_memory_stats", [](const Device& d) {
    allocator_for(resolve_device(d)).reset_peak_stats();
  }, nb::arg("device"));
  m.def("set_memory_limit", [](const Device& d, int64_t bytes) {
    allocator_for(resolve_device(d)).set_memory_limit(bytes);
  }, nb::arg("device"), nb::arg("bytes"));
  m.def("empty_cache", [](const Device& d) {
    nogil([&] { allocator_for(resolve_device(d)).empty_cache(); });
  }, nb::arg("device"));
  m.attr("__version__") = kiln::version();
  m.attr("__build_type__") = kiln::build_type();
}

}  // namespace kiln::py
