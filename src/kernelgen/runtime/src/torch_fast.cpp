// kernelgen_ops.<target>._torch_fast: reads a torch tensor's pointer, dtype, device,
// contiguity and size through torch's C++ API (a few nanoseconds) instead of five Python
// attribute calls. Built only where torch is installed; it must run with the torch it was
// built against, so it refuses to load under any other version.
#include <Python.h>
#include <torch/csrc/autograd/python_variable.h>
#include <torch/version.h>

#define KG_TYPES_TORCH_CODES

#include <cstring>

#include "kernelgen/python.h"
#include "kernelgen/torch_fast.h"

#ifndef KERNELGEN_TORCH_VERSION
#error "KERNELGEN_TORCH_VERSION must name the torch version built against"
#endif

namespace {

int read_tensor(PyObject* obj, kg::py::TensorView* out) {
  if (!THPVariable_CheckExact(obj)) return 0;  // subclasses may override anything: Python path
  try {
    const at::Tensor& t = THPVariable_Unpack(obj);
    if (!t.defined() || !t.has_storage()) return 0;
    out->dtype = kg::types::torch_code(t.scalar_type());
    out->device = t.is_cuda() ? t.get_device() : -1;
    out->contiguous = t.is_contiguous() ? 1 : 0;
    out->numel = t.numel();
    out->data = reinterpret_cast<uint64_t>(t.data_ptr());
    out->negative = 0;
    out->span = out->numel;
    if (!out->contiguous && out->numel > 0) {  // a strided view: the memory it spans
      int64_t last = 0;
      const auto sizes = t.sizes();
      const auto strides = t.strides();
      for (size_t d = 0; d < sizes.size(); ++d) {
        if (sizes[d] > 1 && strides[d] < 0) out->negative = 1;
        last += (sizes[d] - 1) * strides[d];
      }
      out->span = last + 1;
    }
    return 1;
  } catch (...) {
    return 0;
  }
}

PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "_torch_fast",
                          "Fast torch tensor reader for kernelgen launchers (built against torch "
                          KERNELGEN_TORCH_VERSION ").",
                          -1, nullptr, nullptr, nullptr, nullptr, nullptr};

}  // namespace

PyMODINIT_FUNC PyInit__torch_fast(void) {
  PyObject* torch = PyImport_ImportModule("torch");
  if (torch == nullptr) return nullptr;
  PyObject* version = PyObject_GetAttrString(torch, "__version__");
  Py_DECREF(torch);
  const char* v = version ? PyUnicode_AsUTF8(version) : nullptr;
  if (v == nullptr || std::strcmp(v, KERNELGEN_TORCH_VERSION) != 0) {
    PyErr_Format(PyExc_ImportError, "kernelgen's torch reader was built against torch %s, not %s",
                 KERNELGEN_TORCH_VERSION, v ? v : "?");
    Py_XDECREF(version);
    return nullptr;
  }
  Py_DECREF(version);
  PyObject* m = PyModule_Create(&module_def);
  if (m == nullptr) return nullptr;
  PyObject* cap = PyCapsule_New(reinterpret_cast<void*>(&read_tensor), kg::py::kTorchReaderCapsule, nullptr);
  if (cap == nullptr || PyModule_AddObject(m, "reader", cap) < 0) {
    Py_XDECREF(cap);
    Py_DECREF(m);
    return nullptr;
  }
  return m;
}
