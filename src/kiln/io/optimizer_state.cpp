// Optimizer state dicts as safetensors: tensors for the state buffers, metadata for the rest
// (layout in include/kiln/io/optimizer_state.h).
#include "kiln/io/optimizer_state.h"

#include <charconv>
#include <set>
#include <string_view>

#include "kiln/io/safetensors_file.h"

namespace kiln {

namespace {

constexpr const char* kFormat = "kiln.optimizer_state";
constexpr const char* kVersion = "1";
constexpr std::string_view kGroupPrefix = "param_groups.";
constexpr std::string_view kStatePrefix = "state.";

std::string double_text(double v) {
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);  // shortest round trip
  KILN_INTERNAL_ASSERT(ec == std::errc());
  return std::string(buf, end);
}

// Errors while decoding name the file and the entry.
struct Decoder {
  const std::string& name;

  [[noreturn]] void fail(const std::string& what) const {
    KILN_THROW(ValueError, "load_optimizer_state: ", name, ": ", what);
  }

  // A non-negative integer in canonical decimal (no sign, no leading zeros), so that every
  // index has one spelling and two keys can't name the same entry.
  int64_t index(std::string_view text, const std::string& where) const {
    int64_t v = -1;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (text.empty() || ec != std::errc() || end != text.data() + text.size() || v < 0 ||
        (text.size() > 1 && text[0] == '0'))
      fail(::kiln::detail::str_cat(where, ": expected a non-negative integer, got \"", text, "\""));
    return v;
  }

  double number(const std::string& text, const std::string& where) const {
    double v = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (text.empty() || ec != std::errc() || end != text.data() + text.size())
      fail(::kiln::detail::str_cat(where, ": expected a number, got \"", text, "\""));
    return v;
  }

  std::vector<int64_t> index_list(const std::string& text, const std::string& where) const {
    std::vector<int64_t> out;
    if (text.empty()) return out;
    size_t start = 0;
    while (true) {
      size_t comma = text.find(',', start);
      std::string_view item(text.data() + start,
                            (comma == std::string::npos ? text.size() : comma) - start);
      out.push_back(index(item, where));
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
    return out;
  }

  const std::string& entry(const io::SafetensorsMetadata& md, const std::string& key) const {
    auto it = md.find(key);
    if (it == md.end()) fail("missing metadata entry \"" + key + "\"");
    return it->second;
  }
};

// Splits "<index>.<rest>" (rest non-empty); false if there is no dot.
bool split_index(std::string_view s, std::string_view& index, std::string_view& rest) {
  size_t dot = s.find('.');
  if (dot == std::string_view::npos) return false;
  index = s.substr(0, dot);
  rest = s.substr(dot + 1);
  return true;
}

}  // namespace

namespace io {

EncodedOptimizerState encode_optimizer_state(const optim::OptimizerStateDict& sd) {
  EncodedOptimizerState out;
  auto& md = out.metadata;
  md["format"] = kFormat;
  md["format_version"] = kVersion;
  md["param_groups"] = std::to_string(sd.param_groups.size());
  for (size_t g = 0; g < sd.param_groups.size(); ++g) {
    const std::string prefix = ::kiln::detail::str_cat(kGroupPrefix, g, ".");
    std::string params;
    for (int64_t p : sd.param_groups[g].params) {
      if (!params.empty()) params += ',';
      params += std::to_string(p);
    }
    md[prefix + "params"] = params;
    for (const auto& [key, value] : sd.param_groups[g].options)
      md[prefix + "options." + key] = double_text(value);
  }
  for (const auto& [p, st] : sd.state) {
    const std::string prefix = ::kiln::detail::str_cat(kStatePrefix, p, ".");
    md[prefix + "step"] = std::to_string(st.step);
    for (const auto& [buffer, t] : st.buffers) out.tensors[prefix + buffer] = t;
  }
  return out;
}

optim::OptimizerStateDict decode_optimizer_state(const EncodedOptimizerState& encoded,
                                                 const std::string& name) {
  const Decoder d{name};
  const SafetensorsMetadata& md = encoded.metadata;
  const std::string& format = d.entry(md, "format");
  if (format != kFormat)
    d.fail("metadata \"format\" is \"" + format + "\", expected \"" + kFormat +
           "\" (not an optimizer state file?)");
  const std::string& version = d.entry(md, "format_version");
  if (version != kVersion)
    d.fail("unsupported format_version \"" + version + "\"; this build reads version " + kVersion);
  const int64_t num_groups = d.index(d.entry(md, "param_groups"), "metadata \"param_groups\"");
  // Each group has a params entry, so a count beyond the number of entries is a lie (and
  // must not size an allocation).
  if (uint64_t(num_groups) > md.size())
    d.fail(::kiln::detail::str_cat("metadata \"param_groups\" says ", num_groups, " groups but "
                                   "there are only ", md.size(), " metadata entries"));

  optim::OptimizerStateDict sd;
  sd.param_groups.resize(size_t(num_groups));
  std::vector<bool> has_params(size_t(num_groups), false);
  for (const auto& [key, value] : md) {
    std::string_view k = key;
    std::string_view index, rest;
    if (key == "format" || key == "format_version" || key == "param_groups") continue;
    const std::string where = "metadata \"" + key + "\"";
    if (k.starts_with(kGroupPrefix) && split_index(k.substr(kGroupPrefix.size()), index, rest)) {
      const int64_t g = d.index(index, where);
      if (g >= num_groups)
        d.fail(::kiln::detail::str_cat(where, " names group ", g, " but there are ", num_groups,
                                       " groups"));
      auto& group = sd.param_groups[size_t(g)];
      if (rest == "params") {
        group.params = d.index_list(value, where);
        has_params[size_t(g)] = true;
      } else if (rest.starts_with("options.") && rest.size() > 8) {
        group.options[std::string(rest.substr(8))] = d.number(value, where);
      } else {
        d.fail("unknown metadata entry \"" + key + "\"");
      }
    } else if (k.starts_with(kStatePrefix) &&
               split_index(k.substr(kStatePrefix.size()), index, rest) && rest == "step") {
      const int64_t p = d.index(index, where);
      sd.state[p].step = d.index(value, where);
    } else {
      d.fail("unknown metadata entry \"" + key + "\"");
    }
  }
  std::set<int64_t> listed;
  for (int64_t g = 0; g < num_groups; ++g) {
    if (!has_params[size_t(g)])
      d.fail(::kiln::detail::str_cat("missing metadata entry \"param_groups.", g, ".params\""));
    for (int64_t p : sd.param_groups[size_t(g)].params)
      if (!listed.insert(p).second)
        d.fail(::kiln::detail::str_cat("parameter ", p, " is listed twice in the groups"));
  }
  for (const auto& [p, st] : sd.state)
    if (!listed.count(p))
      d.fail(::kiln::detail::str_cat("state for parameter ", p, ", which no group lists"));
  for (const auto& [tensor_name, t] : encoded.tensors) {
    std::string_view k = tensor_name;
    std::string_view index, rest;
    if (!k.starts_with(kStatePrefix) || !split_index(k.substr(kStatePrefix.size()), index, rest) ||
        rest.empty())
      d.fail("unexpected tensor \"" + tensor_name + "\"; expected \"state.<param>.<buffer>\"");
    const int64_t p = d.index(index, "tensor \"" + tensor_name + "\"");
    auto it = sd.state.find(p);
    if (it == sd.state.end())
      d.fail(::kiln::detail::str_cat("tensor \"", tensor_name, "\" is state of parameter ", p,
                                     ", which has no \"state.", p, ".step\" entry"));
    it->second.buffers[std::string(rest)] = t;
  }
  return sd;
}

}  // namespace io

void save_optimizer_state(const optim::OptimizerStateDict& state, const std::string& path) {
  io::EncodedOptimizerState e = io::encode_optimizer_state(state);
  io::save_safetensors(path, e.tensors, e.metadata);
}

optim::OptimizerStateDict load_optimizer_state(const std::string& path, Device device) {
  io::SafetensorsFile file = io::SafetensorsFile::open(path);
  io::EncodedOptimizerState e;
  e.metadata = file.metadata();
  for (const std::string& n : file.names()) e.tensors.emplace(n, file.tensor(n, device));
  return io::decode_optimizer_state(e, path);
}

}  // namespace kiln
