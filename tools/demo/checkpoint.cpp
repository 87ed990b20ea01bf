// Saves the demo model's state dict as safetensors (names as in Llama checkpoints:
// tok_embeddings.weight, layers.0.attention.wq.weight, ...).
#include <map>

#include "kiln/io/serialize.h"
#include "tools/demo/lm_options.h"
#include "tools/demo/tiny_llama.h"

namespace kiln::demo {

void save_checkpoint(TinyLlama& model, const std::string& path) {
  std::map<std::string, Tensor> tensors;
  for (const auto& [name, t] : model.state_dict()) tensors[name] = t;
  const auto& c = model.config();
  save(tensors, path,
       {{"format", "kiln-tiny-llama"},
        {"vocab", std::to_string(c.vocab)},
        {"dim", std::to_string(c.dim)},
        {"layers", std::to_string(c.layers)},
        {"heads", std::to_string(c.heads)},
        {"context", std::to_string(c.context)}});
}

}  // namespace kiln::demo
