// Maps kiln's C++ exceptions to the Python types PyTorch raises for the same mistake:
// IndexError, ValueError, TypeError, NotImplementedError; OutOfMemoryError becomes
// kiln.OutOfMemoryError (a RuntimeError subclass), LinAlgError kiln.linalg.LinAlgError (one
// too, as torch.linalg.LinAlgError); every other kiln::Error is RuntimeError.
#include "bind.h"
#include "kiln/ops/linalg_decompositions.h"

namespace kiln::py {

namespace {
PyObject* g_oom = nullptr;
PyObject* g_linalg = nullptr;
}

void bind_errors(nb::module_& m) {
  g_oom = PyErr_NewExceptionWithDoc("kiln.OutOfMemoryError",
                                    "A device ran out of memory (a RuntimeError).",
                                    PyExc_RuntimeError, nullptr);
  m.attr("OutOfMemoryError") = nb::handle(g_oom);
  g_linalg = PyErr_NewExceptionWithDoc("kiln.linalg.LinAlgError",
                                       "A matrix factorisation does not exist for the input "
                                       "(a RuntimeError).",
                                       PyExc_RuntimeError, nullptr);
  m.attr("_LinAlgError") = nb::handle(g_linalg);
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const OutOfMemoryError& e) {
      PyErr_SetString(g_oom, e.what());
    } catch (const LinAlgError& e) {
      PyErr_SetString(g_linalg, e.what());
    } catch (const IndexError& e) {
      PyErr_SetString(PyExc_IndexError, e.what());
    } catch (const ValueError& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    } catch (const TypeError& e) {
      PyErr_SetString(PyExc_TypeError, e.what());
    } catch (const NotImplementedError& e) {
      PyErr_SetString(PyExc_NotImplementedError, e.what());
    } catch (const Error& e) {  // ShapeError, DeviceError and the rest
      PyErr_SetString(PyExc_RuntimeError, e.what());
    } catch (const nb::cast_error&) {  // an argument of the wrong Python type
      PyErr_SetString(PyExc_TypeError, "an argument has the wrong type (for example a str "
                                       "where a kiln.dtype or a number is expected)");
    }
  });
}

}  // namespace kiln::py
