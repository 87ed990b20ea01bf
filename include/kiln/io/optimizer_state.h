#pragma once
// Optimizer state dicts (optim::OptimizerStateDict) as safetensors files, so that training
// resumes bit-exactly from files: the state tensors are the file's tensors, named
// "state.<param>.<buffer>", and everything else is in the "__metadata__" string map
// (docs/decisions/0012-data-loader-thread-and-optimizer-state-files.md):
//   "format"                          "kiln.optimizer_state"
//   "format_version"                  "1"
//   "param_groups"                    number of groups G
//   "param_groups.<g>.params"         the group's parameter indices, "0,1,2" ("" if none)
//   "param_groups.<g>.options.<name>" each option, a double in shortest round-trip decimal
//   "state.<param>.step"              the step count of each parameter that has state
// Doubles are written with std::to_chars (the shortest text that reads back to the same
// bits, "inf"/"nan" included), so options such as lr round-trip exactly.
#include <map>
#include <string>

#include "kiln/io/safetensors_writer.h"
#include "kiln/optim/optimizer.h"
#include "kiln/runtime/device.h"

namespace kiln {

// Writes state to path atomically (see io::save_safetensors). A separate name from
// kiln::save keeps save({}, path) unambiguous.
void save_optimizer_state(const optim::OptimizerStateDict& state, const std::string& path);

// Reads a file written by save_optimizer_state, state tensors onto device. Errors as
// kiln::load, plus ValueError naming the file and the entry for metadata that is missing,
// malformed or inconsistent with the tensors.
optim::OptimizerStateDict load_optimizer_state(const std::string& path,
                                               Device device = Device(DeviceType::CPU, 0));

namespace io {

// The encoding used by the two functions above, for callers that put optimizer state next
// to other tensors or read it from memory.
struct EncodedOptimizerState {
  std::map<std::string, Tensor> tensors;
  SafetensorsMetadata metadata;
};
EncodedOptimizerState encode_optimizer_state(const optim::OptimizerStateDict& state);
// `name` stands for the file in messages.
optim::OptimizerStateDict decode_optimizer_state(const EncodedOptimizerState& encoded,
                                                 const std::string& name = "<memory>");

}  // namespace io
}  // namespace kiln
