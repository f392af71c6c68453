// Scalar arguments (range-checked integers, real numbers) and the `stream=` argument.
#include "py_internal.h"

#include <cstdio>

namespace kg::py::internal {

int convert_scalar(const LauncherSpec* s, const ArgSpec* a, PyObject* o, Value* out) {
  const ScalarInfo& info = kScalars[a->type];
  if (PyBool_Check(o)) return arg_error(s, a, "expected %s, got bool", info.name);
  if (info.kind == kFloat) {
    // Any real number: float, int, numpy scalars (through __float__ or __index__).
    PyNumberMethods* nb = Py_TYPE(o)->tp_as_number;
    if (!PyFloat_Check(o) && !PyLong_Check(o) && (nb == nullptr || (nb->nb_float == nullptr && nb->nb_index == nullptr))) {
      return arg_error(s, a, "expected a number, got %s", type_name(o));
    }
    double d = PyFloat_AsDouble(o);
    if (d == -1.0 && PyErr_Occurred()) {
      PyErr_Clear();
      return arg_error(s, a, "%s", "number out of range for f32");
    }
    out->f = d;
    return 0;
  }
  if (PyFloat_Check(o)) return arg_error(s, a, "expected an integer (%s), got float", info.name);
  PyObject* idx = PyLong_CheckExact(o) ? (Py_INCREF(o), o) : PyNumber_Index(o);
  if (idx == nullptr) {
    PyErr_Clear();
    return arg_error(s, a, "expected an integer, got %s", type_name(o));
  }
  int overflow = 0;
  long long v = PyLong_AsLongLongAndOverflow(idx, &overflow);
  bool ok = true;
  unsigned long long uv = 0;
  if (overflow == 0) {
    if (v == -1 && PyErr_Occurred()) {
      Py_DECREF(idx);
      return -1;
    }
    if (info.kind == kUnsigned) {
      ok = v >= 0 && (info.bits >= 64 || v <= static_cast<long long>((1ULL << info.bits) - 1));
    } else {
      ok = info.bits >= 64 || (v >= -(1LL << (info.bits - 1)) && v <= (1LL << (info.bits - 1)) - 1);
    }
    out->i = v;
  } else if (overflow > 0 && info.kind == kUnsigned && info.bits == 64) {
    uv = PyLong_AsUnsignedLongLong(idx);
    if (PyErr_Occurred()) {
      PyErr_Clear();
      ok = false;
    } else {
      out->u = uv;
    }
  } else {
    ok = false;
  }
  if (!ok) {
    PyObject* r = PyObject_Repr(idx);
    const char* text = r ? PyUnicode_AsUTF8(r) : "?";
    char detail[200];
    std::snprintf(detail, sizeof detail, "%.80s is out of range for %s %s", text ? text : "?", info.name,
                  info.range);
    Py_XDECREF(r);
    Py_DECREF(idx);
    if (PyErr_Occurred()) PyErr_Clear();
    return arg_error(s, a, "%s", detail);
  }
  Py_DECREF(idx);
  return 0;
}

int convert_stream(const LauncherSpec* s, PyObject* o, void** out) {
  *out = nullptr;
  if (o == nullptr || o == Py_None) return 0;
  PyObject* handle = nullptr;
  if (PyLong_Check(o) && !PyBool_Check(o)) {
    handle = o;
    Py_INCREF(handle);
  } else if ((handle = PyObject_GetAttr(o, g.s_cuda_stream)) != nullptr) {
    // torch.cuda.Stream and CuPy streams: a plain attribute, cheaper than the protocol call.
  } else if (PyErr_Clear(), PyObject_HasAttr(o, g.s_cuda_stream_proto)) {
    PyObject* t = PyObject_CallMethodNoArgs(o, g.s_cuda_stream_proto);
    if (t == nullptr) return -1;
    if (PyTuple_Check(t) && PyTuple_GET_SIZE(t) == 2) {
      handle = PyTuple_GET_ITEM(t, 1);
      Py_INCREF(handle);
    }
    Py_DECREF(t);
  }
  if (handle == nullptr || !PyLong_Check(handle)) {
    Py_XDECREF(handle);
    PyErr_Format(g.argument_error, "%s: argument 'stream': expected an int CUDA stream handle or a stream object, got %s",
                 s->name, type_name(o));
    return -1;
  }
  unsigned long long h = PyLong_AsUnsignedLongLong(handle);
  Py_DECREF(handle);
  if (PyErr_Occurred()) {
    PyErr_Clear();
    PyErr_Format(g.argument_error, "%s: argument 'stream': invalid stream handle", s->name);
    return -1;
  }
  *out = reinterpret_cast<void*>(static_cast<uintptr_t>(h));
  return 0;
}

}  // namespace kg::py::internal
