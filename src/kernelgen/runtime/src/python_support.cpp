// kernelgen Python binding support: see kernelgen/python.h.
//
// Per call, the work is: match arguments to slots (interned-name identity first), convert
// each (ints range-checked; pointers read from ints, torch tensors, __cuda_array_interface__
// or DLPack, with dtype, device, contiguity, writability and size checks where the spec
// declares them), call the C launcher, and return a cached Outcome. Nothing is allocated on
// the launched path beyond what CPython's own calls allocate.
#include "kernelgen/python.h"
#include "kernelgen/torch_fast.h"

#include <cstdio>
#include <cstring>

#include <structmember.h>

namespace kg::py {
namespace {

// DLPack's C ABI (stable since v0.x), declared here to avoid a header dependency.
struct DLDevice {
  int32_t device_type;
  int32_t device_id;
};
struct DLDataType {
  uint8_t code;
  uint8_t bits;
  uint16_t lanes;
};
struct DLTensor {
  void* data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t* shape;
  int64_t* strides;
  uint64_t byte_offset;
};
struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(DLManagedTensor*);
};
constexpr int32_t kDLCUDA = 2;
constexpr int32_t kDLCUDAManaged = 13;

// Elements of type `elem` in one item of a producer's encoding; 0 when it is not accepted.
int torch_per_item(uint8_t elem, int32_t torch_code) {
  const ElemInfo& e = kElems[elem];
  for (int i = 0; i < e.ntorch; ++i) {
    if (e.torch[i].code == torch_code) return e.torch[i].per_item;
  }
  return 0;
}

int dlpack_per_item(uint8_t elem, uint8_t code, uint8_t bits, uint16_t lanes) {
  const ElemInfo& e = kElems[elem];
  for (int i = 0; i < e.ndlpack; ++i) {
    const Encoding& d = e.dlpack[i];
    if (d.code == code && d.bits == bits && d.lanes == lanes) return d.per_item;
  }
  return 0;
}

int typestr_per_item(uint8_t elem, const char* typestr) {
  const ElemInfo& e = kElems[elem];
  for (int i = 0; i < e.ntypestr; ++i) {
    if (std::strcmp(e.typestr[i].typestr, typestr) == 0) return e.typestr[i].per_item;
  }
  return 0;
}

// Bytes of `elements` elements of type `elem`, rounded up to whole bytes.
long long bytes_of(uint8_t elem, int64_t elements) {
  return (static_cast<long long>(elements) * kElems[elem].bits + 7) / 8;
}

bool is_float_scalar(const ArgSpec& a) { return a.kind == kScalar && kScalars[a.type].kind == kFloat; }

// Exception and Outcome types from kernelgen_ops, resolved once per process.
struct Shared {
  PyObject* api = nullptr;  // kernelgen_ops._api: strict mode and the refresh registry live there
  PyObject* argument_error = nullptr;
  PyObject* launch_error = nullptr;
  PyObject* fatal_error = nullptr;
  PyObject* not_launched = nullptr;
  PyObject* outcome_type = nullptr;
  // torch, resolved on first sight of a torch tensor.
  PyObject* torch_tensor = nullptr;
  PyObject* torch_dtypes[kTorchCount] = {};  // by TorchCode
  TensorReader torch_reader = nullptr;  // kernelgen_ops.<target>._torch_fast, when built
  // interned attribute names
  PyObject* s_data_ptr, *s_dtype, *s_is_contiguous, *s_numel, *s_get_device, *s_is_cuda;
  PyObject* s_cai, *s_dlpack, *s_cuda_stream, *s_cuda_stream_proto;
  PyObject* s_data, *s_shape, *s_strides, *s_typestr, *s_stream, *s_strict, *s_refreshers;
};
Shared g;

int init_shared() {
  if (g.outcome_type != nullptr) return 0;
  PyObject* mod = PyImport_ImportModule("kernelgen_ops._api");
  if (mod == nullptr) return -1;
  g.api = mod;  // kept for the life of the process
  g.argument_error = PyObject_GetAttrString(mod, "ArgumentError");
  g.launch_error = PyObject_GetAttrString(mod, "LaunchError");
  g.fatal_error = PyObject_GetAttrString(mod, "CudaFatalError");
  g.not_launched = PyObject_GetAttrString(mod, "NotLaunchedError");
  g.outcome_type = PyObject_GetAttrString(mod, "Outcome");
  if (!g.argument_error || !g.launch_error || !g.fatal_error || !g.not_launched || !g.outcome_type) return -1;
#define KG_INTERN(field, text) \
  if ((g.field = PyUnicode_InternFromString(text)) == nullptr) return -1;
  KG_INTERN(s_data_ptr, "data_ptr")
  KG_INTERN(s_dtype, "dtype")
  KG_INTERN(s_is_contiguous, "is_contiguous")
  KG_INTERN(s_numel, "numel")
  KG_INTERN(s_get_device, "get_device")
  KG_INTERN(s_is_cuda, "is_cuda")
  KG_INTERN(s_cai, "__cuda_array_interface__")
  KG_INTERN(s_dlpack, "__dlpack__")
  KG_INTERN(s_cuda_stream, "cuda_stream")
  KG_INTERN(s_cuda_stream_proto, "__cuda_stream__")
  KG_INTERN(s_data, "data")
  KG_INTERN(s_shape, "shape")
  KG_INTERN(s_strides, "strides")
  KG_INTERN(s_typestr, "typestr")
  KG_INTERN(s_stream, "stream")
  KG_INTERN(s_strict, "STRICT")
  KG_INTERN(s_refreshers, "_refreshers")
#undef KG_INTERN
  return 0;
}

// Resolves torch.Tensor and its dtypes when torch is already imported (never imports it).
void check_torch() {
  if (g.torch_tensor != nullptr) return;
  PyObject* name = PyUnicode_FromString("torch");
  if (name == nullptr) {
    PyErr_Clear();
    return;
  }
  PyObject* torch = PyImport_GetModule(name);
  Py_DECREF(name);
  if (torch == nullptr) {
    PyErr_Clear();
    return;
  }
  PyObject* tensor = PyObject_GetAttrString(torch, "Tensor");
  if (tensor != nullptr && PyType_Check(tensor)) {
    for (int i = 1; i < kTorchCount; ++i) {
      g.torch_dtypes[i] = PyObject_GetAttrString(torch, kTorchAttrs[i]);
      if (g.torch_dtypes[i] == nullptr) PyErr_Clear();  // an older torch without this dtype: never matches
    }
    g.torch_tensor = tensor;
    // The C++ reader, built where torch was installed at build time; optional.
    PyObject* fast = PyImport_ImportModule("kernelgen_ops." KERNELGEN_TARGET_NAME "._torch_fast");
    PyObject* cap = fast ? PyObject_GetAttrString(fast, "reader") : nullptr;
    void* fn = cap ? PyCapsule_GetPointer(cap, kTorchReaderCapsule) : nullptr;
    g.torch_reader = reinterpret_cast<TensorReader>(fn);
    Py_XDECREF(cap);
    Py_XDECREF(fast);
    PyErr_Clear();
  } else {
    Py_XDECREF(tensor);
    PyErr_Clear();
  }
  Py_DECREF(torch);
}

struct Launcher {
  PyObject_HEAD
  vectorcallfunc vectorcall;
  const LauncherSpec* spec;
  PyObject* module_name;
  PyObject** names;            // interned argument names
  PyObject** launched;         // cached "launched" outcomes per kernel
  PyObject* outcomes;          // dict: (kernel index, code) -> Outcome
};

// Raises `type(message)` with the .kernel, .code (and .argument) attributes KernelError documents.
void raise_with(PyObject* type, const char* message, const char* kernel, int32_t code, const char* argument) {
  PyObject* exc = PyObject_CallFunction(type, "s", message);
  if (exc == nullptr) return;
  PyObject* k = PyUnicode_FromString(kernel);
  PyObject* c = PyLong_FromLong(code);
  PyObject* a = argument ? PyUnicode_FromString(argument) : (Py_INCREF(Py_None), Py_None);
  if (k && c && a) {
    PyObject_SetAttrString(exc, "kernel", k);
    PyObject_SetAttrString(exc, "code", c);
    PyObject_SetAttrString(exc, "argument", a);
  }
  Py_XDECREF(k);
  Py_XDECREF(c);
  Py_XDECREF(a);
  PyErr_SetObject(type, exc);
  Py_DECREF(exc);
}

int arg_error(const LauncherSpec* s, const ArgSpec* a, const char* fmt, const char* detail) {
  char msg[640], full[900];
  std::snprintf(msg, sizeof msg, fmt, detail);
  std::snprintf(full, sizeof full, "%s: argument '%s': %s", s->name, a ? a->name : "?", msg);
  raise_with(g.argument_error, full, s->name, 0, a ? a->name : nullptr);
  return -1;
}

const char* type_name(PyObject* o) { return Py_TYPE(o)->tp_name; }

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

// Element count and C-contiguity of a shape/strides pair (strides in elements or bytes).
bool c_contiguous(int ndim, const int64_t* shape, const int64_t* strides, int64_t unit) {
  if (strides == nullptr) return true;
  int64_t expect = unit;
  for (int d = ndim - 1; d >= 0; --d) {
    if (shape[d] != 1 && strides[d] != expect) return false;
    expect *= shape[d];
  }
  return true;
}

// The current device, asked of CUDA at most once per launch (launcher_call resets it).
thread_local int32_t t_current_device = -2;
int32_t current_device() {
  if (t_current_device == -2) t_current_device = kg_rt_current_device();
  return t_current_device;
}

int check_device(const LauncherSpec* s, const ArgSpec* a, int64_t device) {
  const int32_t cur = current_device();
  if (device != cur) {
    char d[160];
    std::snprintf(d, sizeof d, "array is on CUDA device %lld but the current device is %d", (long long)device, cur);
    return arg_error(s, a, "%s", d);
  }
  return 0;
}

int call_int(PyObject* o, PyObject* method, int64_t* out) {
  PyObject* r = PyObject_CallMethodNoArgs(o, method);
  if (r == nullptr) return -1;
  *out = PyLong_AsLongLong(r);
  Py_DECREF(r);
  return (*out == -1 && PyErr_Occurred()) ? -1 : 0;
}

int from_torch(const LauncherSpec* s, const ArgSpec* a, PyObject* o, Value* out, int64_t* numel) {
  TensorView tv;
  if (g.torch_reader != nullptr && g.torch_reader(o, &tv) == 1 && tv.device >= 0 && (!a->contiguous || tv.contiguous)) {
    const int per = torch_per_item(a->type, tv.dtype);
    if (per > 0 && tv.device == current_device()) {
      out->u = tv.data;
      *numel = tv.numel * per;
      return 0;
    }
  }
  // The Python path: also the one that explains what is wrong.
  PyObject* dtype = PyObject_GetAttr(o, g.s_dtype);
  if (dtype == nullptr) return -1;
  const ElemInfo& e = kElems[a->type];
  int per = 0;
  for (int i = 0; i < e.ntorch && per == 0; ++i) {
    if (dtype == g.torch_dtypes[e.torch[i].code]) per = e.torch[i].per_item;
  }
  if (per == 0) {
    PyObject* r = PyObject_Str(dtype);
    Py_DECREF(dtype);
    char d[160];
    std::snprintf(d, sizeof d, "expected dtype torch.%s (%s), got %s", kTorchAttrs[e.torch[0].code], e.name,
                  r ? PyUnicode_AsUTF8(r) : "?");
    Py_XDECREF(r);
    return arg_error(s, a, "%s", d);
  }
  Py_DECREF(dtype);
  int64_t dev = 0;
  if (call_int(o, g.s_get_device, &dev) < 0) return -1;
  if (dev < 0) return arg_error(s, a, "%s", "tensor is in CPU memory; a CUDA tensor is needed");
  if (check_device(s, a, dev) < 0) return -1;
  if (a->contiguous) {
    PyObject* c = PyObject_CallMethodNoArgs(o, g.s_is_contiguous);
    if (c == nullptr) return -1;
    int is_c = PyObject_IsTrue(c);
    Py_DECREF(c);
    if (is_c < 0) return -1;
    if (!is_c) return arg_error(s, a, "%s", "tensor is not contiguous (call .contiguous())");
  }
  int64_t ptr = 0;
  if (call_int(o, g.s_data_ptr, &ptr) < 0) return -1;
  if (a->size_slot >= 0) {
    if (call_int(o, g.s_numel, numel) < 0) return -1;
    *numel *= per;
  }
  out->u = static_cast<uint64_t>(ptr);
  return 0;
}

int from_cai(const LauncherSpec* s, const ArgSpec* a, PyObject* cai, Value* out, int64_t* numel) {
  if (!PyDict_Check(cai)) return arg_error(s, a, "%s", "__cuda_array_interface__ is not a dict");
  PyObject* data = PyDict_GetItemWithError(cai, g.s_data);
  if (data == nullptr || !PyTuple_Check(data) || PyTuple_GET_SIZE(data) != 2) {
    if (PyErr_Occurred()) return -1;
    return arg_error(s, a, "%s", "__cuda_array_interface__['data'] must be (pointer, read_only)");
  }
  unsigned long long p = PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(data, 0));
  if (PyErr_Occurred()) {
    PyErr_Clear();
    return arg_error(s, a, "%s", "__cuda_array_interface__ pointer is not an integer");
  }
  int ro = PyObject_IsTrue(PyTuple_GET_ITEM(data, 1));
  if (ro < 0) return -1;
  if (ro && a->writable) return arg_error(s, a, "%s", "array is read-only but the kernel writes it");
  PyObject* typestr = PyDict_GetItemWithError(cai, g.s_typestr);
  const char* ts = (typestr && PyUnicode_Check(typestr)) ? PyUnicode_AsUTF8(typestr) : nullptr;
  if (ts == nullptr) {
    if (PyErr_Occurred()) return -1;
    return arg_error(s, a, "%s", "__cuda_array_interface__ has no typestr");
  }
  const int per = typestr_per_item(a->type, ts);
  if (per == 0) {
    char d[160];
    std::snprintf(d, sizeof d, "expected %s elements (typestr %s), got typestr %.20s", kElems[a->type].name,
                  kElems[a->type].typestr[0].typestr, ts);
    return arg_error(s, a, "%s", d);
  }
  PyObject* stream = PyDict_GetItemWithError(cai, g.s_stream);
  if (stream != nullptr && stream != Py_None) {
    if (!PyLong_Check(stream) || PyBool_Check(stream)) {
      return arg_error(s, a, "__cuda_array_interface__ stream must be an int or None, got %s", type_name(stream));
    }
    const long long sv = PyLong_AsLongLong(stream);
    if (sv == -1 && PyErr_Occurred()) {
      PyErr_Clear();
      return arg_error(s, a, "%s", "__cuda_array_interface__ stream is out of range");
    }
    if (sv == 0) return arg_error(s, a, "%s", "__cuda_array_interface__ stream 0 is disallowed by the protocol");
  } else if (PyErr_Occurred()) {
    return -1;
  }
  PyObject* shape = PyDict_GetItemWithError(cai, g.s_shape);
  if (shape == nullptr || !PyTuple_Check(shape)) {
    if (PyErr_Occurred()) return -1;
    return arg_error(s, a, "%s", "__cuda_array_interface__ has no shape tuple");
  }
  const Py_ssize_t nd = PyTuple_GET_SIZE(shape);
  if (nd > 32) return arg_error(s, a, "%s", "too many dimensions");
  int64_t dims[32], strides[32];
  int64_t n = 1;
  for (Py_ssize_t i = 0; i < nd; ++i) {
    dims[i] = PyLong_AsLongLong(PyTuple_GET_ITEM(shape, i));
    if (dims[i] < 0 || PyErr_Occurred()) {
      PyErr_Clear();
      return arg_error(s, a, "%s", "invalid shape");
    }
    n *= dims[i];
  }
  PyObject* st = PyDict_GetItemWithError(cai, g.s_strides);
  bool contiguous = true;
  if (st != nullptr && st != Py_None) {
    if (!PyTuple_Check(st) || PyTuple_GET_SIZE(st) != nd) return arg_error(s, a, "%s", "invalid strides");
    for (Py_ssize_t i = 0; i < nd; ++i) strides[i] = PyLong_AsLongLong(PyTuple_GET_ITEM(st, i));
    if (PyErr_Occurred()) return -1;
    contiguous = c_contiguous(static_cast<int>(nd), dims, strides, bytes_of(a->type, per));
  } else if (PyErr_Occurred()) {
    return -1;
  }
  if (a->contiguous && !contiguous) return arg_error(s, a, "%s", "array is not C-contiguous");
  if (p == 0 && n > 0) return arg_error(s, a, "%s", "array has a null data pointer");
  *numel = n * per;
  out->u = p;
  return 0;
}

int from_dlpack(const LauncherSpec* s, const ArgSpec* a, PyObject* o, Value* out, int64_t* numel) {
  PyObject* cap = PyObject_CallMethodNoArgs(o, g.s_dlpack);
  if (cap == nullptr) return -1;
  auto* mt = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(cap, "dltensor"));
  if (mt == nullptr) {
    Py_DECREF(cap);
    PyErr_Clear();
    return arg_error(s, a, "%s", "__dlpack__() did not return a 'dltensor' capsule");
  }
  const DLTensor& t = mt->dl_tensor;
  int rc = 0;
  char d[200];
  if (t.device.device_type != kDLCUDA && t.device.device_type != kDLCUDAManaged) {
    std::snprintf(d, sizeof d, "DLPack array is on device type %d; a CUDA array is needed", t.device.device_type);
    rc = arg_error(s, a, "%s", d);
  } else if (dlpack_per_item(a->type, t.dtype.code, t.dtype.bits, t.dtype.lanes) == 0) {
    std::snprintf(d, sizeof d, "expected %s elements, got DLPack dtype (code %d, bits %d, lanes %d)",
                  kElems[a->type].name, t.dtype.code, t.dtype.bits, t.dtype.lanes);
    rc = arg_error(s, a, "%s", d);
  } else if (a->contiguous && !c_contiguous(t.ndim, t.shape, t.strides, 1)) {
    rc = arg_error(s, a, "%s", "array is not C-contiguous");
  } else if (check_device(s, a, t.device.device_id) < 0) {
    rc = -1;
  } else {
    int64_t n = 1;
    for (int i = 0; i < t.ndim; ++i) n *= t.shape[i];
    *numel = n * dlpack_per_item(a->type, t.dtype.code, t.dtype.bits, t.dtype.lanes);
    out->u = reinterpret_cast<uint64_t>(static_cast<char*>(t.data) + t.byte_offset);
    if (out->u == 0 && n > 0) rc = arg_error(s, a, "%s", "array has a null data pointer");
  }
  Py_DECREF(cap);  // the capsule's destructor calls the producer's deleter
  return rc;
}

int convert_pointer(const LauncherSpec* s, const ArgSpec* a, PyObject* o, Value* out, int64_t* numel) {
  *numel = -1;
  if (PyLong_CheckExact(o)) {
    unsigned long long p = PyLong_AsUnsignedLongLong(o);
    if (PyErr_Occurred()) {
      PyErr_Clear();
      return arg_error(s, a, "%s", "integer device pointer is negative or does not fit in 64 bits");
    }
    if (p == 0) return arg_error(s, a, "%s", "null device pointer (0)");
    out->u = p;
    return 0;
  }
  if (o == Py_None) return arg_error(s, a, "%s", "None is not a device pointer");
  if (PyBool_Check(o) || PyFloat_Check(o)) {
    return arg_error(s, a, "expected a CUDA array or an int device pointer, got %s", type_name(o));
  }
  if (g.torch_tensor == nullptr) check_torch();  // torch.Tensor, once torch is imported
  if (g.torch_tensor != nullptr && PyObject_TypeCheck(o, reinterpret_cast<PyTypeObject*>(g.torch_tensor))) {
    return from_torch(s, a, o, out, numel);
  }
  PyObject* cai = PyObject_GetAttr(o, g.s_cai);
  if (cai != nullptr) {
    int rc = from_cai(s, a, cai, out, numel);
    Py_DECREF(cai);
    return rc;
  }
  PyErr_Clear();
  if (PyObject_HasAttr(o, g.s_dlpack)) return from_dlpack(s, a, o, out, numel);
  if (PyLong_Check(o)) {  // int subclasses (not bool, handled above)
    unsigned long long p = PyLong_AsUnsignedLongLong(o);
    if (PyErr_Occurred() || p == 0) {
      PyErr_Clear();
      return arg_error(s, a, "%s", "invalid integer device pointer");
    }
    out->u = p;
    return 0;
  }
  return arg_error(s, a,
                   "expected a CUDA array (torch tensor, __cuda_array_interface__ or DLPack) or an int device "
                   "pointer, got %s",
                   type_name(o));
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

// Matches positional and keyword arguments to slots. `stream` is a keyword of every launcher.
int bind(Launcher* self, PyObject* const* args, size_t nargsf, PyObject* kwnames, PyObject** slots,
         PyObject** stream, bool ints_only) {
  const LauncherSpec* s = self->spec;
  const Py_ssize_t npos = PyVectorcall_NARGS(nargsf);
  const int32_t max_pos = ints_only ? 0 : s->npositional;
  if (npos > max_pos) {
    PyErr_Format(PyExc_TypeError, "%s%s() takes %d positional arguments but %zd were given", ints_only ? "plan of " : "",
                 s->name, max_pos, npos);
    return -1;
  }
  for (Py_ssize_t i = 0; i < npos; ++i) slots[i] = args[i];
  const Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
  for (Py_ssize_t k = 0; k < nkw; ++k) {
    PyObject* key = PyTuple_GET_ITEM(kwnames, k);
    PyObject* value = args[npos + k];
    if (key == g.s_stream && !ints_only) {  // keyword names are interned: identity is the common case
      *stream = value;
      continue;
    }
    int found = -1;
    for (int32_t i = 0; i < s->nargs; ++i) {
      if (self->names[i] == key) {
        found = i;
        break;
      }
    }
    if (found < 0) {
      for (int32_t i = 0; i < s->nargs; ++i) {
        if (PyUnicode_Compare(self->names[i], key) == 0) {
          found = i;
          break;
        }
      }
      if (PyErr_Occurred()) return -1;
    }
    if (found < 0) {
      if (!ints_only && PyUnicode_CompareWithASCIIString(key, "stream") == 0) {
        *stream = value;
        continue;
      }
      PyErr_Format(PyExc_TypeError, "%s() got an unexpected keyword argument '%U'", s->name, key);
      return -1;
    }
    if (slots[found] != nullptr) {
      PyErr_Format(PyExc_TypeError, "%s() got multiple values for argument '%s'", s->name, s->args[found].name);
      return -1;
    }
    slots[found] = value;
  }
  for (int32_t i = 0; i < s->nargs; ++i) {
    const ArgSpec& a = s->args[i];
    const bool needed = ints_only ? (a.kind == kScalar && !is_float_scalar(a)) : true;
    if (needed && slots[i] == nullptr) {
      PyErr_Format(PyExc_TypeError, "%s%s() missing required argument '%s'", ints_only ? "plan of " : "", s->name,
                   a.name);
      return -1;
    }
  }
  return 0;
}

int kernel_index(const LauncherSpec* s, const kg_kernel_info* k) {
  for (int32_t i = 0; i < s->nkernels; ++i) {
    if (s->kernels[i] == k) return i;
  }
  return 0;
}

PyObject* make_outcome(Launcher* self, int32_t kidx, int32_t code) {
  const kg_kernel_info* k = self->spec->kernels[kidx];
  char reason[512];
  kg_rt_describe(k, code, reason, sizeof reason);
  return PyObject_CallFunction(g.outcome_type, "ssiis", k->module, k->name, code == KG_LAUNCHED ? 1 : 0, code,
                               code == KG_LAUNCHED ? "" : reason);
}

PyObject* outcome(Launcher* self, int32_t kidx, int32_t code) {
  if (code == KG_LAUNCHED) {
    PyObject* o = self->launched[kidx];
    Py_INCREF(o);
    return o;
  }
  PyObject* key = PyLong_FromLongLong((static_cast<long long>(kidx) << 32) | static_cast<uint32_t>(code));
  if (key == nullptr) return nullptr;
  PyObject* o = PyDict_GetItemWithError(self->outcomes, key);
  if (o != nullptr) {
    Py_DECREF(key);
    Py_INCREF(o);
    return o;
  }
  if (PyErr_Occurred() || (o = make_outcome(self, kidx, code)) == nullptr) {
    Py_DECREF(key);
    return nullptr;
  }
  if (PyDict_Size(self->outcomes) < 4096) PyDict_SetItem(self->outcomes, key, o);
  Py_DECREF(key);
  return o;
}

PyObject* raise_for(Launcher* self, const kg_kernel_info* k, int32_t code) {
  char reason[512];
  kg_rt_describe(k, code, reason, sizeof reason);
  PyObject* type = g.launch_error;
  const int32_t cat = KG_CATEGORY(code);
  if (code > 0) {
    type = g.not_launched;
  } else if (cat == KG_E_REQUIRES || cat == KG_E_EXPR) {
    type = g.argument_error;
  } else if (cat == KG_E_CUDA && kg_rt_is_sticky_error(KG_DETAIL(code))) {
    type = g.fatal_error;
    std::strncat(reason, " (sticky error: the CUDA context is unusable; restart the process)",
                 sizeof reason - std::strlen(reason) - 1);
  }
  raise_with(type, reason, k ? k->name : self->spec->name, code, nullptr);
  return nullptr;
}

// Strict mode is process-wide (kernelgen_ops.set_strict): read only when a launcher does not
// launch, so the launched path never pays for it. Returns 1, 0, or -1 with an error set.
int strict_mode() {
  PyObject* v = PyObject_GetAttr(g.api, g.s_strict);
  if (v == nullptr) return -1;
  const int r = PyObject_IsTrue(v);
  Py_DECREF(v);
  return r;
}

// A launcher's result for a code other than KG_LAUNCHED: an error is raised; "not launched"
// (kernel index kidx) is returned as an outcome, or raised in strict mode.
PyObject* not_launched_or_raise(Launcher* self, const kg_kernel_info* k, int32_t kidx, int32_t code) {
  if (code < 0 || strict_mode() != 0) {
    if (PyErr_Occurred()) return nullptr;
    return raise_for(self, k, code);
  }
  return outcome(self, kidx, code);
}

constexpr int kMaxArgs = 64;

PyObject* launcher_call(PyObject* obj, PyObject* const* args, size_t nargsf, PyObject* kwnames) {
  auto* self = reinterpret_cast<Launcher*>(obj);
  const LauncherSpec* s = self->spec;
  PyObject* slots[kMaxArgs] = {};
  PyObject* stream_obj = nullptr;
  if (bind(self, args, nargsf, kwnames, slots, &stream_obj, false) < 0) return nullptr;
  t_current_device = -2;
  Value values[kMaxArgs];
  int64_t numels[kMaxArgs];
  for (int32_t i = 0; i < s->nargs; ++i) {
    const ArgSpec& a = s->args[i];
    numels[i] = -1;
    int reuse = -1;  // the same array in two slots (out=x): convert it once when the checks agree
    if (a.kind == kPointer && !PyLong_CheckExact(slots[i])) {
      for (int32_t j = 0; j < i && reuse < 0; ++j) {
        const ArgSpec& b = s->args[j];
        if (slots[j] == slots[i] && b.kind == kPointer && b.type == a.type && b.contiguous == a.contiguous &&
            (b.writable || !a.writable) && (b.size_slot >= 0 || a.size_slot < 0)) {
          reuse = j;
        }
      }
    }
    if (reuse >= 0) {
      values[i] = values[reuse];
      numels[i] = numels[reuse];
      continue;
    }
    int rc = a.kind == kScalar ? convert_scalar(s, &a, slots[i], &values[i])
                               : convert_pointer(s, &a, slots[i], &values[i], &numels[i]);
    if (rc < 0) return nullptr;
  }
  if (s->nsizes > 0) {
    int64_t sizes[kMaxArgs];
    const int32_t rc = s->sizes(values, sizes);
    if (rc != KG_LAUNCHED) {
      // A size expression failed. The plan's own verdict (a requires clause, empty work...)
      // explains bad arguments better; only when the plan is fine is the size the error.
      kg_plan p{};
      int32_t kidx = 0;
      const int32_t pc = s->plan(values, &p, &kidx);
      if (pc != KG_LAUNCHED) return not_launched_or_raise(self, s->kernels[kidx], kidx, pc);
      char reason[512];
      kg_rt_describe(s->kernels[0], rc, reason, sizeof reason);
      std::strncat(reason, " (computing the array sizes)", sizeof reason - std::strlen(reason) - 1);
      raise_with(g.argument_error, reason, s->name, rc, nullptr);
      return nullptr;
    }
    for (int32_t i = 0; i < s->nargs; ++i) {
      const ArgSpec& a = s->args[i];
      if (a.kind != kPointer || a.size_slot < 0 || numels[i] < 0) continue;
      const int64_t need = sizes[a.size_slot];
      if (need > 0 && numels[i] < need) {
        char d[240];
        std::snprintf(d, sizeof d, "array has %lld elements but the kernel accesses %lld (of %s: %lld bytes, %lld needed)",
                      (long long)numels[i], (long long)need, kElems[a.type].name, bytes_of(a.type, numels[i]),
                      bytes_of(a.type, need));
        arg_error(s, &a, "%s", d);
        return nullptr;
      }
    }
  }
  void* stream = nullptr;
  if (convert_stream(s, stream_obj, &stream) < 0) return nullptr;
  const kg_kernel_info* ran = nullptr;
  const int32_t code = s->launch(values, stream, &ran);
  if (code == KG_LAUNCHED) {
    return outcome(self, ran ? kernel_index(s, ran) : 0, code);
  }
  return not_launched_or_raise(self, ran, ran ? kernel_index(s, ran) : 0, code);
}

PyObject* launcher_plan(PyObject* obj, PyObject* const* args, size_t nargsf, PyObject* kwnames) {
  auto* self = reinterpret_cast<Launcher*>(obj);
  const LauncherSpec* s = self->spec;
  PyObject* slots[kMaxArgs] = {};
  PyObject* unused = nullptr;
  if (bind(self, args, nargsf, kwnames, slots, &unused, true) < 0) return nullptr;
  Value values[kMaxArgs];
  for (int32_t i = 0; i < s->nargs; ++i) {
    values[i].u = 0;
    const ArgSpec& a = s->args[i];
    if (slots[i] == nullptr) continue;
    if (a.kind == kPointer || is_float_scalar(a)) {
      PyErr_Format(PyExc_TypeError, "plan of %s() takes integer arguments only; got %s '%s'", s->name,
                   a.kind == kPointer ? "pointer" : "f32", a.name);
      return nullptr;
    }
    if (convert_scalar(s, &a, slots[i], &values[i]) < 0) return nullptr;
  }
  kg_plan p{};
  int32_t kidx = 0;
  const int32_t code = s->plan(values, &p, &kidx);
  char reason[512] = "";
  if (code != KG_LAUNCHED) kg_rt_describe(s->kernels[kidx], code, reason, sizeof reason);
  return Py_BuildValue("{s:(LLL),s:(LLL),s:L,s:O,s:i,s:s,s:s,s:i}", "grid", p.grid[0], p.grid[1], p.grid[2], "block",
                       p.block[0], p.block[1], p.block[2], "shared_mem", p.shared_mem, "launched",
                       code == KG_LAUNCHED ? Py_True : Py_False, "code", code, "reason", reason, "kernel",
                       s->kernels[kidx]->name, "variant", p.variant);
}

PyObject* plan_method(PyObject* self, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  return launcher_plan(self, args, static_cast<size_t>(nargs), kwnames);
}

void launcher_dealloc(PyObject* obj) {
  auto* self = reinterpret_cast<Launcher*>(obj);
  Py_XDECREF(self->outcomes);
  Py_XDECREF(self->module_name);
  Py_TYPE(obj)->tp_free(obj);  // names and launched outcomes live as long as the process
}

PyObject* launcher_repr(PyObject* obj) {
  auto* self = reinterpret_cast<Launcher*>(obj);
  return PyUnicode_FromFormat("<kernelgen launcher %U.%s>", self->module_name, self->spec->name);
}

PyObject* get_doc(PyObject* obj, void*) {
  return PyUnicode_FromString(reinterpret_cast<Launcher*>(obj)->spec->doc);
}
PyObject* get_name(PyObject* obj, void*) {
  return PyUnicode_FromString(reinterpret_cast<Launcher*>(obj)->spec->name);
}
PyObject* get_args(PyObject* obj, void*) {
  const LauncherSpec* s = reinterpret_cast<Launcher*>(obj)->spec;
  PyObject* t = PyTuple_New(s->nargs);
  if (t == nullptr) return nullptr;
  for (int32_t i = 0; i < s->nargs; ++i) {
    PyObject* n = PyUnicode_FromString(s->args[i].name);
    if (n == nullptr) {
      Py_DECREF(t);
      return nullptr;
    }
    PyTuple_SET_ITEM(t, i, n);
  }
  return t;
}

PyMethodDef launcher_methods[] = {
    {"plan", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(plan_method)),
     METH_FASTCALL | METH_KEYWORDS,
     "plan(**integer_args) -> dict: grid, block, shared_mem and whether (or why not) the kernel would launch; "
     "needs no GPU."},
    {nullptr, nullptr, 0, nullptr}};

PyGetSetDef launcher_getset[] = {
    {"__doc__", get_doc, nullptr, nullptr, nullptr},
    {"__name__", get_name, nullptr, nullptr, nullptr},
    {"arg_names", get_args, nullptr, "argument names, kernel arguments first, then host arguments", nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr}};

PyTypeObject* launcher_type() {
  static PyTypeObject* type = nullptr;
  if (type != nullptr) return type;
  static PyType_Slot slots[] = {
      {Py_tp_dealloc, reinterpret_cast<void*>(launcher_dealloc)},
      {Py_tp_repr, reinterpret_cast<void*>(launcher_repr)},
      {Py_tp_call, reinterpret_cast<void*>(PyVectorcall_Call)},
      {Py_tp_methods, launcher_methods},
      {Py_tp_getset, launcher_getset},
      {0, nullptr}};
  static PyMemberDef members[] = {
      {"__vectorcalloffset__", T_PYSSIZET, offsetof(Launcher, vectorcall), READONLY, nullptr},
      {nullptr, 0, 0, 0, nullptr}};
  static PyType_Slot all_slots[8];
  int n = 0;
  for (; slots[n].slot != 0; ++n) all_slots[n] = slots[n];
  all_slots[n++] = {Py_tp_members, members};
  all_slots[n] = {0, nullptr};
  static PyType_Spec spec = {"kernelgen_ops.Launcher", sizeof(Launcher), 0,
                             Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL, all_slots};
  type = reinterpret_cast<PyTypeObject*>(PyType_FromSpec(&spec));
  return type;
}

// ---- runtime functions

PyObject* rt_refresh(PyObject*, PyObject*) {
  kg_rt_refresh();
  Py_RETURN_NONE;
}
PyObject* rt_target(PyObject*, PyObject*) { return PyUnicode_FromString(kg_rt_target()); }
PyObject* rt_target_cc(PyObject*, PyObject*) {
  const int32_t cc = kg_rt_target_cc();
  return Py_BuildValue("(ii)", cc / 10, cc % 10);
}
PyObject* rt_device_count(PyObject*, PyObject*) { return PyLong_FromLong(kg_rt_device_count()); }
PyObject* rt_current_device(PyObject*, PyObject*) { return PyLong_FromLong(kg_rt_current_device()); }
PyObject* rt_device_cc(PyObject*, PyObject* arg) {
  const long d = PyLong_AsLong(arg);
  if (d == -1 && PyErr_Occurred()) return nullptr;
  const int32_t cc = kg_rt_device_cc(static_cast<int32_t>(d));
  if (cc < 0) Py_RETURN_NONE;
  return Py_BuildValue("(ii)", cc / 10, cc % 10);
}

// The compiled type tables, as Python data, so tests can compare them with the registry:
// ([(name, kind, bits)], [(name, bits, [(torch attr, per_item)], [(code, bits, per_item)],
// [(typestr, per_item)])]), DLPack entries as (code, bits, lanes, per_item).
PyObject* rt_type_tables(PyObject*, PyObject*) {
  PyObject* scalars = PyList_New(0);
  PyObject* elems = PyList_New(0);
  if (scalars == nullptr || elems == nullptr) goto fail;
  for (int i = 1; i < kScalarCount; ++i) {
    const ScalarInfo& s = kScalars[i];
    PyObject* row = Py_BuildValue("(sii)", s.name, s.kind, s.bits);
    if (row == nullptr || PyList_Append(scalars, row) < 0) {
      Py_XDECREF(row);
      goto fail;
    }
    Py_DECREF(row);
  }
  for (int i = 1; i < kElemCount; ++i) {
    const ElemInfo& e = kElems[i];
    PyObject* torch = PyList_New(0);
    PyObject* dl = PyList_New(0);
    PyObject* ts = PyList_New(0);
    bool ok = torch && dl && ts;
    for (int j = 0; ok && j < e.ntorch; ++j) {
      PyObject* t = Py_BuildValue("(si)", kTorchAttrs[e.torch[j].code], e.torch[j].per_item);
      ok = t && PyList_Append(torch, t) == 0;
      Py_XDECREF(t);
    }
    for (int j = 0; ok && j < e.ndlpack; ++j) {
      PyObject* t = Py_BuildValue("(iiii)", e.dlpack[j].code, e.dlpack[j].bits, e.dlpack[j].lanes, e.dlpack[j].per_item);
      ok = t && PyList_Append(dl, t) == 0;
      Py_XDECREF(t);
    }
    for (int j = 0; ok && j < e.ntypestr; ++j) {
      PyObject* t = Py_BuildValue("(si)", e.typestr[j].typestr, e.typestr[j].per_item);
      ok = t && PyList_Append(ts, t) == 0;
      Py_XDECREF(t);
    }
    PyObject* row = ok ? Py_BuildValue("(siOOO)", e.name, e.bits, torch, dl, ts) : nullptr;
    Py_XDECREF(torch);
    Py_XDECREF(dl);
    Py_XDECREF(ts);
    if (row == nullptr || PyList_Append(elems, row) < 0) {
      Py_XDECREF(row);
      goto fail;
    }
    Py_DECREF(row);
  }
  return Py_BuildValue("(NN)", scalars, elems);
fail:
  Py_XDECREF(scalars);
  Py_XDECREF(elems);
  return nullptr;
}

PyMethodDef runtime_methods[] = {
    {"type_tables", rt_type_tables, METH_NOARGS, "The compiled scalar and element type tables (for tests)."},
    {"refresh", rt_refresh, METH_NOARGS, "Re-read every module's kill switch from the environment."},
    {"target", rt_target, METH_NOARGS, "The target this library was built for."},
    {"target_capability", rt_target_cc, METH_NOARGS, "(major, minor) compute capability of the target."},
    {"device_count", rt_device_count, METH_NOARGS, "Number of CUDA devices (0 when none or no driver)."},
    {"current_device", rt_current_device, METH_NOARGS, "The current CUDA device, -1 when none."},
    {"device_capability", rt_device_cc, METH_O, "(major, minor) of a device, or None."},
    {nullptr, nullptr, 0, nullptr}};

}  // namespace

int init_module(PyObject* module) {
  if (init_shared() < 0) return -1;
  // kernelgen_ops.refresh() must reach every target library loaded in the process (each
  // has its own kill switches): register this module's library with it, once per library
  // (keyed by the library's own refresh entry point).
  PyObject* registry = PyObject_GetAttr(g.api, g.s_refreshers);
  if (registry == nullptr) return -1;
  PyObject* key = PyLong_FromVoidPtr(reinterpret_cast<void*>(&kg_rt_refresh));
  int rc = -1;
  if (key != nullptr) {
    rc = PyDict_Contains(registry, key);
    if (rc == 0) {
      static PyMethodDef refresh_def = {"refresh", rt_refresh, METH_NOARGS,
                                        "Re-read the kill switches of this module's target library."};
      PyObject* fn = PyCFunction_New(&refresh_def, module);
      rc = fn ? PyDict_SetItem(registry, key, fn) : -1;
      Py_XDECREF(fn);
    }
    Py_DECREF(key);
  }
  Py_DECREF(registry);
  return rc < 0 ? -1 : 0;
}

int add_launcher(PyObject* module, const LauncherSpec* spec) {
  if (spec->nargs > kMaxArgs) {
    PyErr_Format(PyExc_RuntimeError, "%s: more than %d arguments", spec->name, kMaxArgs);
    return -1;
  }
  PyTypeObject* type = launcher_type();
  if (type == nullptr) return -1;
  auto* self = PyObject_New(Launcher, type);
  if (self == nullptr) return -1;
  self->vectorcall = launcher_call;
  self->spec = spec;
  self->module_name = PyModule_GetNameObject(module);
  self->names = new PyObject*[spec->nargs > 0 ? spec->nargs : 1];
  self->launched = new PyObject*[spec->nkernels];
  self->outcomes = PyDict_New();
  if (self->module_name == nullptr || self->outcomes == nullptr) {
    Py_DECREF(self);
    return -1;
  }
  for (int32_t i = 0; i < spec->nargs; ++i) {
    self->names[i] = PyUnicode_InternFromString(spec->args[i].name);
    if (self->names[i] == nullptr) return -1;
  }
  for (int32_t i = 0; i < spec->nkernels; ++i) {
    self->launched[i] = make_outcome(self, i, KG_LAUNCHED);
    if (self->launched[i] == nullptr) return -1;
  }
  PyObject* plan = PyObject_GetAttrString(reinterpret_cast<PyObject*>(self), "plan");
  if (plan == nullptr) return -1;
  char plan_name[200];
  std::snprintf(plan_name, sizeof plan_name, "plan_%s", spec->name);
  if (PyModule_AddObject(module, plan_name, plan) < 0) {
    Py_DECREF(plan);
    return -1;
  }
  if (PyModule_AddObject(module, spec->name, reinterpret_cast<PyObject*>(self)) < 0) {
    Py_DECREF(self);
    return -1;
  }
  return 0;
}

int add_runtime_functions(PyObject* module) { return PyModule_AddFunctions(module, runtime_methods); }

}  // namespace kg::py
