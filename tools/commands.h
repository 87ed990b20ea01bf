#pragma once
// The subcommands of the kiln program, one file each.
namespace kiln::tools {
int print_info();
int print_op_coverage();
int run_demo(int argc, char** argv);
int run_bench(int argc, char** argv);  // tools/bench/
}  // namespace kiln::tools
