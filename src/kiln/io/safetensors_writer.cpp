#include "kiln/io/safetensors_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cerrno>
#include <functional>
#include <system_error>

#include "kiln/autograd/autograd.h"
#include "kiln/io/json_reader.h"
#include "kiln/io/safetensors_dtype.h"

namespace kiln::io {

static_assert(std::endian::native == std::endian::little,
              "kiln's safetensors writer assumes a little-endian host, as the format is");

namespace {

using detail::quote_for_message;

struct Planned {
  const std::string* name;
  const Tensor* tensor;
  uint64_t nbytes;
};

void check_utf8(std::string_view s, const char* what) {
  size_t bad = detail::find_invalid_utf8(s);
  KILN_CHECK(bad == std::string_view::npos, ValueError, "save_safetensors: ", what, " ",
             quote_for_message(s), " is not valid UTF-8 (byte ", bad, ")");
}

// Validates the input and orders it as the reference implementation does.
std::vector<Planned> plan(const NamedTensors& tensors, const SafetensorsMetadata& metadata) {
  std::vector<Planned> out;
  out.reserve(tensors.size());
  for (const auto& [name, t] : tensors) {
    KILN_CHECK(name != "__metadata__", ValueError,
               "save_safetensors: the tensor name \"__metadata__\" is reserved for the header's "
               "metadata");
    check_utf8(name, "tensor name");
    KILN_CHECK(t.defined(), ValueError, "save_safetensors: tensor ", quote_for_message(name),
               " is undefined");
    out.push_back({&name, &t, uint64_t(t.numel()) * element_size(t.dtype())});
  }
  for (const auto& [k, v] : metadata) {
    check_utf8(k, "metadata key");
    check_utf8(v, "metadata value");
  }
  std::sort(out.begin(), out.end(), [](const Planned& a, const Planned& b) {
    int ra = detail::safetensors_dtype_rank(a.tensor->dtype());
    int rb = detail::safetensors_dtype_rank(b.tensor->dtype());
    return ra != rb ? ra > rb : *a.name < *b.name;  // std::string compares bytewise
  });
  // Names must be unique (the vector overload can repeat one).
  std::vector<const std::string*> names;
  names.reserve(out.size());
  for (const Planned& p : out) names.push_back(p.name);
  std::sort(names.begin(), names.end(),
            [](const std::string* a, const std::string* b) { return *a < *b; });
  for (size_t i = 1; i < names.size(); ++i) {
    KILN_CHECK(*names[i] != *names[i - 1], ValueError, "save_safetensors: the tensor name ",
               quote_for_message(*names[i]), " appears twice");
  }
  return out;
}

// JSON string escaping as serde_json writes it (so headers match the reference byte for byte).
void append_json_string(std::string& out, std::string_view s) {
  static const char* hex = "0123456789abcdef";
  out += '"';
  for (char ch : s) {
    auto c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          out += "\\u00";
          out += hex[c >> 4];
          out += hex[c & 15];
        } else {
          out += ch;
        }
    }
  }
  out += '"';
}

std::string header_json(const std::vector<Planned>& plan, const SafetensorsMetadata& metadata) {
  std::string h = "{";
  bool first = true;
  if (!metadata.empty()) {
    h += "\"__metadata__\":{";
    for (const auto& [k, v] : metadata) {
      if (!first) h += ',';
      first = false;
      append_json_string(h, k);
      h += ':';
      append_json_string(h, v);
    }
    h += '}';
    first = false;
  }
  uint64_t offset = 0;
  for (const Planned& p : plan) {
    if (!first) h += ',';
    first = false;
    append_json_string(h, *p.name);
    h += ":{\"dtype\":\"";
    h += detail::safetensors_dtype_name(p.tensor->dtype());
    h += "\",\"shape\":[";
    const Shape& shape = p.tensor->shape();
    for (size_t i = 0; i < shape.size(); ++i) {
      if (i) h += ',';
      h += std::to_string(shape[i]);
    }
    h += "],\"data_offsets\":[";
    h += std::to_string(offset);
    h += ',';
    offset += p.nbytes;
    h += std::to_string(offset);
    h += "]}";
  }
  h += '}';
  h.append((8 - h.size() % 8) % 8, ' ');  // the data buffer starts 8-byte aligned
  return h;
}

using Sink = std::function<void(const void*, size_t)>;

void write_image(const std::vector<Planned>& plan, const SafetensorsMetadata& metadata,
                 const Sink& sink) {
  const std::string header = header_json(plan, metadata);
  const uint64_t n = header.size();
  sink(&n, 8);  // little-endian (static_assert above)
  sink(header.data(), header.size());
  autograd::NoGradGuard no_grad;
  for (const Planned& p : plan) {
    if (p.nbytes == 0) continue;
    // One tensor at a time: a contiguous host copy (no copy for contiguous CPU tensors).
    Tensor host = p.tensor->contiguous().cpu();
    KILN_INTERNAL_ASSERT(host.nbytes() == p.nbytes && host.is_contiguous());
    sink(host.raw_data(), size_t(p.nbytes));
  }
}

std::string os_error(int err) { return std::error_code(err, std::system_category()).message(); }

void write_fully(int fd, const void* data, size_t n, const std::string& path) {
  const auto* p = static_cast<const uint8_t*>(data);
  while (n > 0) {
    ssize_t w = ::write(fd, p, std::min(n, size_t(1) << 30));
    if (w < 0) {
      if (errno == EINTR) continue;
      KILN_THROW(Error, "save_safetensors: can't write '", path, "': ", os_error(errno));
    }
    p += w;
    n -= size_t(w);
  }
}

NamedTensors from_map(const std::map<std::string, Tensor>& tensors) {
  return NamedTensors(tensors.begin(), tensors.end());
}

}  // namespace

std::vector<uint8_t> safetensors_bytes(const NamedTensors& tensors,
                                       const SafetensorsMetadata& metadata) {
  std::vector<Planned> p = plan(tensors, metadata);
  std::vector<uint8_t> out;
  write_image(p, metadata, [&](const void* data, size_t n) {
    const auto* b = static_cast<const uint8_t*>(data);
    out.insert(out.end(), b, b + n);
  });
  return out;
}

void save_safetensors(const std::string& path, const NamedTensors& tensors,
                      const SafetensorsMetadata& metadata) {
  std::vector<Planned> p = plan(tensors, metadata);
  // A temporary name in the same directory (rename is atomic only within a file system).
  static std::atomic<uint64_t> counter{0};
  std::string tmp;
  int fd = -1;
  for (int attempt = 0; fd < 0; ++attempt) {
    tmp = path + ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(counter++);
    fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0 && (errno != EEXIST || attempt > 100))
      KILN_THROW(Error, "save_safetensors: can't create '", tmp, "': ", os_error(errno));
  }
  try {
    write_image(p, metadata, [&](const void* data, size_t n) { write_fully(fd, data, n, tmp); });
    if (::fsync(fd) != 0)
      KILN_THROW(Error, "save_safetensors: can't flush '", tmp, "': ", os_error(errno));
    int rc = ::close(fd);
    fd = -1;
    if (rc != 0) KILN_THROW(Error, "save_safetensors: can't close '", tmp, "': ", os_error(errno));
    if (::rename(tmp.c_str(), path.c_str()) != 0)
      KILN_THROW(Error, "save_safetensors: can't rename '", tmp, "' to '", path, "': ",
                 os_error(errno));
  } catch (...) {
    if (fd >= 0) ::close(fd);
    ::unlink(tmp.c_str());
    throw;
  }
}

void save_safetensors(const std::string& path, const std::map<std::string, Tensor>& tensors,
                      const SafetensorsMetadata& metadata) {
  save_safetensors(path, from_map(tensors), metadata);
}

void save_safetensors(const std::string& path,
                      std::initializer_list<std::pair<std::string, Tensor>> tensors,
                      const SafetensorsMetadata& metadata) {
  save_safetensors(path, NamedTensors(tensors), metadata);
}

}  // namespace kiln::io
