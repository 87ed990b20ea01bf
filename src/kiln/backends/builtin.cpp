// Registers the backends built into libkiln. Called (once) by the first registry lookup, so
// nothing depends on static-initialisation order across translation units.
#include <memory>
#include <mutex>

#include "kiln/runtime/backend.h"
#include "kiln/runtime/internal.h"

namespace kiln {

namespace detail {
std::unique_ptr<Backend> make_cpu_backend();
std::unique_ptr<Backend> make_testing_backend();
std::unique_ptr<Backend> make_meta_backend();
#ifdef KILN_WITH_XPU
std::unique_ptr<Backend> make_xpu_backend();
#endif
}  // namespace detail

void ensure_builtin_backends() {
  static std::once_flag once;
  std::call_once(once, [] {
    // A backend registered by hand before the first lookup wins over the built-in one.
    detail::register_backend_if_absent(detail::make_cpu_backend());
    detail::register_backend_if_absent(detail::make_testing_backend());
    detail::register_backend_if_absent(detail::make_meta_backend());
#ifdef KILN_WITH_XPU
    detail::register_backend_if_absent(detail::make_xpu_backend());
#endif
  });
}

}  // namespace kiln
