// Placeholder until the indexing op family lands; replaced by src/kiln/ops/indexing*.cpp.
namespace kiln::ops {
void register_indexing_ops() {}
}
namespace kiln::cpu {
void register_indexing_kernels() {}
}
