// Array arguments: integer device pointers, torch tensors (the C++ reader first, then the
// Python path that also explains what is wrong), __cuda_array_interface__ and DLPack, with
// the dtype, device, contiguity, writability and element-count facts the checks need.
#include "py_internal.h"

#include <cstdio>
#include <cstring>

namespace kg::py::internal {
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

// The DLPack device types a user is likely to pass by mistake, by name; others by number.
void not_on_cuda(char* d, size_t n, int32_t type) {
  const char* name = type == 1   ? "the CPU (kDLCPU)"
                     : type == 3 ? "pinned host memory (kDLCUDAHost)"
                     : type == 4 ? "an OpenCL device (kDLOpenCL)"
                     : type == 10 ? "a ROCm device (kDLROCM)"
                     : type == 11 ? "pinned ROCm host memory (kDLROCMHost)"
                     : nullptr;
  if (name != nullptr)
    std::snprintf(d, n, "DLPack array is on %s; a CUDA device array is needed (move it to the GPU)", name);
  else
    std::snprintf(d, n, "DLPack array is on device type %d; a CUDA device array is needed", type);
}

// Lanes of type `elem` (elements, for non-vector types; bytes, for void) in one item of a
// producer's encoding; 0 when it is not accepted.
int dlpack_per_item(uint8_t elem, uint8_t code, uint8_t bits, uint16_t lanes) {
  const ElemInfo& e = kElems[elem];
  if (e.any_dtype) return (bits * lanes) % 8 == 0 ? bits * lanes / 8 : 0;
  for (int i = 0; i < e.ndlpack; ++i) {
    const Encoding& d = e.dlpack[i];
    if (d.code == code && d.bits == bits && d.lanes == lanes) return d.per_item;
  }
  return 0;
}

// Bytes of one item of a __cuda_array_interface__ typestr ("<f4": 4); 0 when malformed.
int typestr_bytes(const char* typestr) {
  if (std::strlen(typestr) < 3) return 0;
  int n = 0;
  for (const char* c = typestr + 2; *c != 0; ++c) {
    if (*c < '0' || *c > '9' || n > 1000) return 0;
    n = n * 10 + (*c - '0');
  }
  return n;
}

int typestr_per_item(uint8_t elem, const char* typestr) {
  const ElemInfo& e = kElems[elem];
  if (e.any_dtype) return typestr_bytes(typestr);
  for (int i = 0; i < e.ntypestr; ++i) {
    if (std::strcmp(e.typestr[i].typestr, typestr) == 0) return e.typestr[i].per_item;
  }
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
    // torch._C._cuda_getCurrentRawStream: the stream a launch naming none takes when an array is a
    // torch tensor (absent from a torch without CUDA: the legacy default stream then).
    PyObject* c = PyObject_GetAttrString(torch, "_C");
    PyObject* current = c ? PyObject_GetAttrString(c, "_cuda_getCurrentRawStream") : nullptr;
    Py_XDECREF(c);
    if (current != nullptr && PyCallable_Check(current)) {
      g.torch_current_stream = current;
    } else {
      Py_XDECREF(current);
    }
    PyErr_Clear();
    // The C++ reader, built where torch was installed at build time; optional.
    PyObject* fast = PyImport_ImportModule(KERNELGEN_PACKAGE "." KERNELGEN_TARGET_NAME "._torch_fast");
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

// a * b and a + b for a, b >= 0, false when the result does not fit in int64.
bool mul_fits(int64_t a, int64_t b, int64_t* out) {
  if (a != 0 && b > INT64_MAX / a) return false;
  *out = a * b;
  return true;
}
bool add_fits(int64_t a, int64_t b, int64_t* out) {
  if (b > INT64_MAX - a) return false;
  *out = a + b;
  return true;
}

// The element count of a shape whose dimensions are >= 0 (0 when one of them is 0); -1 when it
// does not fit in int64.
int64_t element_count(int ndim, const int64_t* shape) {
  for (int d = 0; d < ndim; ++d) {
    if (shape[d] == 0) return 0;
  }
  int64_t n = 1;
  for (int d = 0; d < ndim; ++d) {
    if (!mul_fits(n, shape[d], &n)) return -1;
  }
  return n;
}

// C-contiguity of a shape/strides pair (strides in elements or bytes; null: C-contiguous), for a
// shape whose element count times `unit` fits in int64 (an empty array is contiguous).
bool c_contiguous(int ndim, const int64_t* shape, const int64_t* strides, int64_t unit) {
  if (strides == nullptr || element_count(ndim, shape) == 0) return true;
  int64_t expect = unit;
  for (int d = ndim - 1; d >= 0; --d) {
    if (shape[d] != 1 && strides[d] != expect) return false;
    expect *= shape[d];
  }
  return true;
}

// span_items' verdicts other than a count.
constexpr int64_t kNegativeStride = -1;
constexpr int64_t kTooLarge = -2;  // the count, or a product or sum on the way, does not fit in int64

// The items a view spans from its data pointer to its last item + 1 (0 when empty), for a shape
// whose dimensions are >= 0 and strides in items (null: C-contiguous); kNegativeStride when a
// dimension of more than one item has a negative stride, kTooLarge when it does not fit in int64.
int64_t span_items(int ndim, const int64_t* shape, const int64_t* strides) {
  const int64_t n = element_count(ndim, shape);
  if (n < 0) return kTooLarge;
  if (strides == nullptr || n == 0) return n;
  int64_t last = 0;
  for (int d = 0; d < ndim; ++d) {
    if (shape[d] <= 1) continue;
    if (strides[d] < 0) return kNegativeStride;
    int64_t step = 0;
    if (!mul_fits(shape[d] - 1, strides[d], &step) || !add_fits(last, step, &last)) return kTooLarge;
  }
  return last == INT64_MAX ? kTooLarge : last + 1;
}

int negative_stride(const LauncherSpec* s, const ArgSpec* a) {
  return arg_error(s, a, "%s", "array has a negative stride; views with non-negative strides are accepted");
}

int too_large(const LauncherSpec* s, const ArgSpec* a) {
  return arg_error(s, a, "%s", "invalid shape: the array's size (its shape and strides) does not fit in 64 bits");
}

// span_items' verdict as an error (-1), or 0 for a count.
int span_error(const LauncherSpec* s, const ArgSpec* a, int64_t span) {
  if (span == kNegativeStride) return negative_stride(s, a);
  if (span < 0) return too_large(s, a);
  return 0;
}

// From what a producer says (the data pointer, the items the view spans and the lanes in one
// item) to elements of the argument's type, checking that its size in bits fits in int64, a
// vector type's lane count and the pointer's alignment.
int finish_array(const LauncherSpec* s, const ArgSpec* a, uint64_t ptr, int64_t span, int per, int64_t* numel) {
  const ElemInfo& e = kElems[a->type];
  int64_t lanes = 0, bits = 0;
  if (span < 0 || per <= 0 || !mul_fits(span, per, &lanes) || !mul_fits(lanes, e.bits / e.lanes, &bits)) {
    return too_large(s, a);
  }
  char d[200];
  if (e.lanes > 1 && lanes % e.lanes != 0) {
    std::snprintf(d, sizeof d, "array has %lld lanes, not a multiple of the %d of one %s element", (long long)lanes,
                  e.lanes, e.name);
    return arg_error(s, a, "%s", d);
  }
  const uint32_t align = elem_align(a->type);
  if (align > 1 && ptr % align != 0) {
    std::snprintf(d, sizeof d, "data pointer 0x%llx is not %u-byte aligned, as %s elements need",
                  (unsigned long long)ptr, align, e.name);
    return arg_error(s, a, "%s", d);
  }
  *numel = lanes / e.lanes;
  return 0;
}

int check_device(const LauncherSpec* s, const ArgSpec* a, int64_t device, CallState* cs) {
  const int32_t cur = cs->current_device();
  if (device != cur && cur < 0) {
    char d[160];
    std::snprintf(d, sizeof d, "array is on CUDA device %lld but no CUDA device is visible here (no GPU, or no driver)",
                  (long long)device);
    return arg_error(s, a, "%s", d);
  }
  if (device != cur) {
    char d[240];
    std::snprintf(d, sizeof d,
                  "array is on CUDA device %lld but the current device is %d; launch with device %lld current "
                  "(torch: `with torch.cuda.device(%lld):`)",
                  (long long)device, cur, (long long)device, (long long)device);
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

// A torch tensor outside CUDA memory: the error names its device type (tensor.device.type), "cpu"
// as CPU memory, any other as itself ("meta", "mps", ...).
int not_cuda_tensor(const LauncherSpec* s, const ArgSpec* a, PyObject* o) {
  PyObject* device = PyObject_GetAttrString(o, "device");
  PyObject* type = device != nullptr ? PyObject_GetAttrString(device, "type") : nullptr;
  const char* name = type != nullptr && PyUnicode_Check(type) ? PyUnicode_AsUTF8(type) : nullptr;
  char d[200];
  if (name == nullptr || std::strcmp(name, "cpu") == 0) {
    std::snprintf(d, sizeof d, "tensor is in CPU memory; a CUDA tensor is needed");
  } else {
    std::snprintf(d, sizeof d, "tensor is on device type '%.40s', not in CUDA memory; a CUDA tensor is needed", name);
  }
  Py_XDECREF(type);
  Py_XDECREF(device);
  PyErr_Clear();
  return arg_error(s, a, "%s", d);
}

// The Python path of torch tensors, taken where the C++ reader declines (or is absent) and for
// every tensor with something wrong: it also explains what.
int from_torch(const LauncherSpec* s, const ArgSpec* a, PyObject* o, Value* out, int64_t* numel, CallState* cs) {
  PyObject* dtype = PyObject_GetAttr(o, g.s_dtype);
  if (dtype == nullptr) return producer_error(s, a, "tensor.dtype");
  const ElemInfo& e = kElems[a->type];
  int per = 0;
  for (int i = 0; i < e.ntorch && per == 0; ++i) {
    if (dtype == g.torch_dtypes[e.torch[i].code]) per = e.torch[i].per_item;
  }
  if (e.any_dtype) {  // void*: any dtype, counted in bytes
    int64_t size = 0;
    if (call_int(o, g.s_element_size, &size) < 0) {
      Py_DECREF(dtype);
      return producer_error(s, a, "tensor.element_size()");
    }
    per = static_cast<int>(size);
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
  PyObject* is_cuda = PyObject_GetAttr(o, g.s_is_cuda);
  if (is_cuda == nullptr) return producer_error(s, a, "tensor.is_cuda");
  const int on_cuda = PyObject_IsTrue(is_cuda);
  Py_DECREF(is_cuda);
  if (on_cuda < 0) return producer_error(s, a, "tensor.is_cuda");
  if (!on_cuda) return not_cuda_tensor(s, a, o);
  int64_t dev = 0;
  if (call_int(o, g.s_get_device, &dev) < 0) return producer_error(s, a, "tensor.get_device()");
  if (dev < 0) return not_cuda_tensor(s, a, o);
  if (check_device(s, a, dev, cs) < 0) return -1;
  PyObject* c = PyObject_CallMethodNoArgs(o, g.s_is_contiguous);
  if (c == nullptr) return producer_error(s, a, "tensor.is_contiguous()");
  const int is_c = PyObject_IsTrue(c);
  Py_DECREF(c);
  if (is_c < 0) return -1;
  if (a->contiguous && !is_c) return arg_error(s, a, "%s", "tensor is not contiguous (call .contiguous())");
  int64_t ptr = 0;
  if (call_int(o, g.s_data_ptr, &ptr) < 0) return producer_error(s, a, "tensor.data_ptr()");
  out->u = static_cast<uint64_t>(ptr);
  if (a->size_slot < 0 && e.lanes == 1 && elem_align(a->type) <= 1) return 0;  // nothing to count or align
  int64_t span = 0;
  if (call_int(o, g.s_numel, &span) < 0) return producer_error(s, a, "tensor.numel()");
  if (!is_c && span > 0) {  // a strided view: the memory it spans
    PyObject* shape = PyObject_GetAttr(o, g.s_shape);
    PyObject* strides = shape ? PyObject_CallMethodNoArgs(o, g.s_stride) : nullptr;
    if (strides == nullptr || !PyTuple_Check(shape) || !PyTuple_Check(strides) ||
        PyTuple_GET_SIZE(shape) != PyTuple_GET_SIZE(strides) || PyTuple_GET_SIZE(shape) > 32) {
      Py_XDECREF(shape);
      Py_XDECREF(strides);
      if (PyErr_Occurred()) return producer_error(s, a, "tensor.stride()");
      return arg_error(s, a, "%s", "tensor.shape and tensor.stride() disagree");
    }
    const int nd = static_cast<int>(PyTuple_GET_SIZE(shape));
    int64_t dims[32], st[32];
    for (int i = 0; i < nd; ++i) {
      dims[i] = PyLong_AsLongLong(PyTuple_GET_ITEM(shape, i));
      st[i] = PyLong_AsLongLong(PyTuple_GET_ITEM(strides, i));
    }
    Py_DECREF(shape);
    Py_DECREF(strides);
    if (PyErr_Occurred()) return producer_error(s, a, "tensor.stride()");
    for (int i = 0; i < nd; ++i) {
      if (dims[i] < 0) return arg_error(s, a, "%s", "tensor.shape has a negative dimension");
    }
    span = span_items(nd, dims, st);
    if (span_error(s, a, span) < 0) return -1;
  }
  return finish_array(s, a, out->u, span, per, numel);
}

// The data pointer of a __cuda_array_interface__ ('data': (pointer, read_only)): an int (or an
// object with __index__) in [0, 2**64). Returns 0, or -1 with an ArgumentError set.
int cai_pointer(const LauncherSpec* s, const ArgSpec* a, PyObject* o, unsigned long long* p) {
  PyObject* v = PyLong_Check(o) && !PyBool_Check(o) ? (Py_INCREF(o), o) : nullptr;
  if (v == nullptr && !PyBool_Check(o) && PyIndex_Check(o)) v = PyNumber_Index(o);
  if (v == nullptr) {
    PyErr_Clear();
    return arg_error(s, a, "__cuda_array_interface__ pointer is not an integer (got %s)", type_name(o));
  }
  *p = PyLong_AsUnsignedLongLong(v);
  if (PyErr_Occurred()) {
    PyErr_Clear();
    PyObject* zero = PyLong_FromLong(0);
    const bool negative = zero != nullptr && PyObject_RichCompareBool(v, zero, Py_LT) == 1;
    Py_XDECREF(zero);
    PyErr_Clear();
    Py_DECREF(v);
    return arg_error(s, a, "%s",
                     negative ? "__cuda_array_interface__ pointer is negative"
                              : "__cuda_array_interface__ pointer does not fit in 64 bits");
  }
  Py_DECREF(v);
  return 0;
}

int from_cai(const LauncherSpec* s, const ArgSpec* a, PyObject* cai, Value* out, int64_t* numel, CallState* cs) {
  if (!PyDict_Check(cai)) return arg_error(s, a, "%s", "__cuda_array_interface__ is not a dict");
  // The protocol's versions are 0 to 3; a later one may change what the fields mean.
  PyObject* version = PyDict_GetItemWithError(cai, g.s_version);
  if (version != nullptr && version != Py_None) {
    const long long ver = PyLong_Check(version) && !PyBool_Check(version) ? PyLong_AsLongLong(version) : -1;
    PyErr_Clear();
    if (ver < 0 || ver > 3) {
      PyObject* r = PyObject_Repr(version);
      const char* text = r != nullptr ? PyUnicode_AsUTF8(r) : nullptr;
      char d[200];
      std::snprintf(d, sizeof d, "__cuda_array_interface__ version %.40s is not supported (versions 0 to 3 are)",
                    text != nullptr ? text : "?");
      Py_XDECREF(r);
      PyErr_Clear();
      return arg_error(s, a, "%s", d);
    }
  } else if (PyErr_Occurred()) {
    return -1;
  }
  // A mask marks invalid elements, which a kernel would read as data.
  PyObject* mask = PyDict_GetItemWithError(cai, g.s_mask);
  if (mask != nullptr && mask != Py_None) {
    return arg_error(s, a, "%s", "masked arrays (a __cuda_array_interface__ mask) are not supported");
  } else if (PyErr_Occurred()) {
    return -1;
  }
  PyObject* data = PyDict_GetItemWithError(cai, g.s_data);
  if (data == nullptr || !PyTuple_Check(data) || PyTuple_GET_SIZE(data) != 2) {
    if (PyErr_Occurred()) return -1;
    return arg_error(s, a, "%s", "__cuda_array_interface__['data'] must be (pointer, read_only)");
  }
  unsigned long long p = 0;
  if (cai_pointer(s, a, PyTuple_GET_ITEM(data, 0), &p) < 0) return -1;
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
  const int item_bytes = typestr_bytes(ts);
  if (per == 0 || item_bytes == 0) {
    char d[160];
    std::snprintf(d, sizeof d, "expected %s elements (typestr %s), got typestr %.20s", kElems[a->type].name,
                  kElems[a->type].any_dtype ? "of any dtype" : kElems[a->type].typestr[0].typestr, ts);
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
    if (!cs->has_cai_stream) {  // the first array's: where a launch naming no stream goes
      cs->cai_stream = static_cast<uint64_t>(sv);
      cs->has_cai_stream = true;
    }
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
  for (Py_ssize_t i = 0; i < nd; ++i) {
    PyObject* dim = PyTuple_GET_ITEM(shape, i);
    dims[i] = PyLong_Check(dim) && !PyBool_Check(dim) ? PyLong_AsLongLong(dim) : -1;
    if (PyErr_Occurred() && PyLong_Check(dim)) {
      PyErr_Clear();
      return too_large(s, a);
    }
    if (dims[i] < 0) {
      PyErr_Clear();
      return arg_error(s, a, "%s", "invalid shape: a dimension is negative or not an integer");
    }
  }
  // The element count, and its size in bytes, must fit in int64.
  const int64_t n = element_count(static_cast<int>(nd), dims);
  int64_t bytes = 0;
  if (n < 0 || !mul_fits(n, item_bytes, &bytes)) return too_large(s, a);
  PyObject* st = PyDict_GetItemWithError(cai, g.s_strides);
  bool contiguous = true;
  int64_t span = n;
  if (st != nullptr && st != Py_None) {
    if (!PyTuple_Check(st) || PyTuple_GET_SIZE(st) != nd) return arg_error(s, a, "%s", "invalid strides");
    for (Py_ssize_t i = 0; i < nd; ++i) {
      PyObject* stride = PyTuple_GET_ITEM(st, i);
      strides[i] = PyLong_Check(stride) && !PyBool_Check(stride) ? PyLong_AsLongLong(stride) : 0;
      if (PyErr_Occurred() || !PyLong_Check(stride) || PyBool_Check(stride)) {
        PyErr_Clear();
        return arg_error(s, a, "%s", "invalid strides: each must be an integer in 64 bits");
      }
    }
    contiguous = c_contiguous(static_cast<int>(nd), dims, strides, item_bytes);
    if (!contiguous && !a->contiguous) {  // strides in bytes -> items, then the memory the view spans
      for (Py_ssize_t i = 0; i < nd; ++i) {
        if (strides[i] % item_bytes != 0) return arg_error(s, a, "%s", "strides are not whole items");
        strides[i] /= item_bytes;
      }
      span = span_items(static_cast<int>(nd), dims, strides);
      if (span_error(s, a, span) < 0) return -1;
    }
  } else if (PyErr_Occurred()) {
    return -1;
  }
  if (a->contiguous && !contiguous) return arg_error(s, a, "%s", "array is not C-contiguous");
  if (p == 0 && n > 0) return arg_error(s, a, "%s", "array has a null data pointer");
  out->u = p;
  return finish_array(s, a, p, span, per, numel);
}

// The producer's capsule. When the launch's stream is known, the producer is told it (the
// protocol's __dlpack__(stream=...): it then orders its pending work before that stream's; 1 is
// the legacy default stream, which the protocol does not let 0 name); a producer that takes no
// stream argument is asked again without one.
PyObject* dlpack_capsule(PyObject* o, const CallState* cs) {
  if (!cs->stream_known) return PyObject_CallMethodNoArgs(o, g.s_dlpack);
  const uintptr_t h = reinterpret_cast<uintptr_t>(cs->stream);
  PyObject* sv = PyLong_FromUnsignedLongLong(h != 0 ? h : 1);
  PyObject* kwnames = sv != nullptr ? PyTuple_Pack(1, g.s_stream) : nullptr;
  PyObject* cap = nullptr;
  if (kwnames != nullptr) {
    PyObject* argv[2] = {o, sv};
    cap = PyObject_VectorcallMethod(g.s_dlpack, argv, 1, kwnames);
  }
  Py_XDECREF(kwnames);
  Py_XDECREF(sv);
  if (cap == nullptr && PyErr_ExceptionMatches(PyExc_TypeError)) {
    PyErr_Clear();
    cap = PyObject_CallMethodNoArgs(o, g.s_dlpack);
  }
  return cap;
}

// A DLTensor's shape as the counts read it: 0 to 32 dimensions (a shape to read when there are
// any), none of them negative.
bool dlpack_shape_valid(const DLTensor& t) {
  if (t.ndim < 0 || t.ndim > 32 || (t.ndim > 0 && t.shape == nullptr)) return false;
  for (int i = 0; i < t.ndim; ++i) {
    if (t.shape[i] < 0) return false;
  }
  return true;
}

int from_dlpack(const LauncherSpec* s, const ArgSpec* a, PyObject* o, Value* out, int64_t* numel, CallState* cs) {
  // The protocol's device query first: a producer may refuse to export an array that is not on
  // the current device, and the device check says what is wrong in kernelgen's words.
  PyObject* where = PyObject_CallMethodNoArgs(o, g.s_dlpack_device);
  if (where != nullptr) {
    int type = 0, id = 0;
    const bool ok = PyTuple_Check(where) && PyArg_ParseTuple(where, "ii", &type, &id);
    Py_DECREF(where);
    if (!ok) return producer_error(s, a, "__dlpack_device__()");
    if (type != kDLCUDA && type != kDLCUDAManaged) {
      char d[160];
      not_on_cuda(d, sizeof d, type);
      return arg_error(s, a, "%s", d);
    }
    if (check_device(s, a, id, cs) < 0) return -1;
  } else if (PyErr_ExceptionMatches(PyExc_AttributeError)) {
    PyErr_Clear();
  } else {
    return producer_error(s, a, "__dlpack_device__()");
  }
  PyObject* cap = dlpack_capsule(o, cs);
  if (cap == nullptr) return producer_error(s, a, "__dlpack__()");
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
    not_on_cuda(d, sizeof d, t.device.device_type);
    rc = arg_error(s, a, "%s", d);
  } else if (dlpack_per_item(a->type, t.dtype.code, t.dtype.bits, t.dtype.lanes) == 0) {
    std::snprintf(d, sizeof d, "expected %s elements, got DLPack dtype (code %d, bits %d, lanes %d)",
                  kElems[a->type].name, t.dtype.code, t.dtype.bits, t.dtype.lanes);
    rc = arg_error(s, a, "%s", d);
  } else if (!dlpack_shape_valid(t)) {
    rc = arg_error(s, a, "%s", "invalid DLPack shape: a dimension is negative, or ndim is out of range");
  } else if (element_count(t.ndim, t.shape) < 0 ||
             reinterpret_cast<uint64_t>(t.data) > UINT64_MAX - t.byte_offset) {
    rc = too_large(s, a);
  } else if (a->contiguous && !c_contiguous(t.ndim, t.shape, t.strides, 1)) {
    rc = arg_error(s, a, "%s", "array is not C-contiguous");
  } else if (check_device(s, a, t.device.device_id, cs) < 0) {
    rc = -1;
  } else {
    const int64_t n = element_count(t.ndim, t.shape);
    const int64_t span = c_contiguous(t.ndim, t.shape, t.strides, 1) ? n : span_items(t.ndim, t.shape, t.strides);
    out->u = reinterpret_cast<uint64_t>(t.data) + t.byte_offset;
    if (out->u == 0 && n > 0) {
      rc = arg_error(s, a, "%s", "array has a null data pointer");
    } else if (span < 0) {
      rc = span_error(s, a, span);
    } else {
      rc = finish_array(s, a, out->u, span, dlpack_per_item(a->type, t.dtype.code, t.dtype.bits, t.dtype.lanes), numel);
    }
  }
  Py_DECREF(cap);  // the capsule's destructor calls the producer's deleter
  return rc;
}

}  // namespace

bool any_torch_tensor(PyObject* const* slots, int32_t n) {
  if (g.torch_tensor == nullptr) check_torch();  // resolves torch.Tensor once torch is imported
  if (g.torch_tensor == nullptr) return false;
  for (int32_t i = 0; i < n; ++i) {
    if (slots[i] != nullptr && PyObject_TypeCheck(slots[i], reinterpret_cast<PyTypeObject*>(g.torch_tensor))) {
      return true;
    }
  }
  return false;
}

int32_t CallState::query_device() {
  device = kg_rt_current_device();
  return device;
}

bool is_integer(PyObject* o, bool as_index) {
  if (PyLong_Check(o)) return !PyBool_Check(o);
  if (!as_index || PyFloat_Check(o) || is_numpy_bool(o) || !PyIndex_Check(o)) return false;
  if (g.torch_tensor == nullptr) check_torch();
  if (g.torch_tensor != nullptr && PyObject_TypeCheck(o, reinterpret_cast<PyTypeObject*>(g.torch_tensor))) {
    return false;
  }
  const int array = PyObject_HasAttr(o, g.s_cai) || PyObject_HasAttr(o, g.s_dlpack);
  PyErr_Clear();
  return !array;
}

int array_dtypes(PyObject* o, const uint8_t* elems, int32_t n, uint32_t* mask, const CallState* cs) {
  *mask = ~0u;  // no dtype known: integer pointers, and objects the conversion will refuse
  if (o == Py_None || PyBool_Check(o) || PyFloat_Check(o) || is_integer(o, true)) return 0;
  if (g.torch_tensor == nullptr) check_torch();
  if (g.torch_tensor != nullptr && PyObject_TypeCheck(o, reinterpret_cast<PyTypeObject*>(g.torch_tensor))) {
    PyObject* dtype = PyObject_GetAttr(o, g.s_dtype);
    if (dtype == nullptr) return -1;
    *mask = 0;
    for (int32_t j = 0; j < n; ++j) {
      const ElemInfo& e = kElems[elems[j]];
      for (int i = 0; i < e.ntorch; ++i) {
        if (dtype == g.torch_dtypes[e.torch[i].code]) *mask |= 1u << elems[j];
      }
    }
    Py_DECREF(dtype);
    return 0;
  }
  PyObject* cai = PyObject_GetAttr(o, g.s_cai);
  if (cai != nullptr) {
    PyObject* typestr = PyDict_Check(cai) ? PyDict_GetItemWithError(cai, g.s_typestr) : nullptr;
    const char* ts = (typestr && PyUnicode_Check(typestr)) ? PyUnicode_AsUTF8(typestr) : nullptr;
    if (ts != nullptr) {
      *mask = 0;
      for (int32_t j = 0; j < n; ++j) {
        if (typestr_per_item(elems[j], ts) > 0) *mask |= 1u << elems[j];
      }
    }
    Py_DECREF(cai);
    PyErr_Clear();
    return 0;
  }
  PyErr_Clear();
  if (PyObject_HasAttr(o, g.s_dlpack)) {
    PyObject* cap = dlpack_capsule(o, cs);  // told the launch's stream, as the conversion does
    if (cap == nullptr) {
      PyErr_Clear();  // the conversion of this argument reports the producer's error
      return 0;
    }
    auto* mt = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(cap, "dltensor"));
    if (mt != nullptr) {
      const DLDataType& t = mt->dl_tensor.dtype;
      *mask = 0;
      for (int32_t j = 0; j < n; ++j) {
        if (dlpack_per_item(elems[j], t.code, t.bits, t.lanes) > 0) *mask |= 1u << elems[j];
      }
    }
    PyErr_Clear();
    Py_DECREF(cap);  // the capsule's destructor calls the producer's deleter
  }
  return 0;
}

namespace {

// An integer device pointer (an int, an int subclass such as an IntEnum, or an object with
// __index__ such as numpy.int64): null only where the argument is nullable, aligned for its type.
int from_integer(const LauncherSpec* s, const ArgSpec* a, PyObject* o, Value* out) {
  PyObject* v = PyLong_Check(o) ? (Py_INCREF(o), o) : PyNumber_Index(o);
  if (v == nullptr) return producer_error(s, a, "__index__()");
  const unsigned long long p = PyLong_AsUnsignedLongLong(v);
  Py_DECREF(v);
  if (PyErr_Occurred()) {
    PyErr_Clear();
    return arg_error(s, a, "%s", "integer device pointer is negative or does not fit in 64 bits");
  }
  if (p == 0) {
    if (a->nullable) {  // declared nullable: a null pointer, not size-checked
      out->u = 0;
      return 0;
    }
    return arg_error(s, a, "%s", "null device pointer (0); the argument is not declared nullable");
  }
  const uint32_t align = elem_align(a->type);
  if (align > 1 && p % align != 0) {
    char d[160];
    std::snprintf(d, sizeof d, "device pointer 0x%llx is not %u-byte aligned, as %s elements need", p, align,
                  kElems[a->type].name);
    return arg_error(s, a, "%s", d);
  }
  out->u = p;
  return 0;
}

}  // namespace

int convert_pointer(const LauncherSpec* s, const ArgSpec* a, PyObject* o, Value* out, int64_t* numel, CallState* cs) {
  *numel = -1;
  if (is_integer(o, false)) return from_integer(s, a, o, out);  // ints and their subclasses
  if (o == Py_None) {
    if (a->nullable) {
      out->u = 0;
      return 0;
    }
    return arg_error(s, a, "%s", "None is not a device pointer; the argument is not declared nullable");
  }
  if (PyBool_Check(o) || PyFloat_Check(o) || is_numpy_bool(o)) {
    return arg_error(s, a, "expected a CUDA array or an int device pointer, got %s", type_name(o));
  }
  if (g.torch_tensor == nullptr) check_torch();  // torch.Tensor, once torch is imported
  if (g.torch_tensor != nullptr && PyObject_TypeCheck(o, reinterpret_cast<PyTypeObject*>(g.torch_tensor))) {
    if (g.torch_reader != nullptr && read_torch(a, o, out, numel, cs)) return 0;
    return from_torch(s, a, o, out, numel, cs);
  }
  PyObject* cai = PyObject_GetAttr(o, g.s_cai);
  if (cai != nullptr) {
    int rc = from_cai(s, a, cai, out, numel, cs);
    Py_DECREF(cai);
    return rc;
  }
  if (!PyErr_ExceptionMatches(PyExc_AttributeError)) return producer_error(s, a, "__cuda_array_interface__");
  PyErr_Clear();
  if (PyObject_HasAttr(o, g.s_dlpack)) return from_dlpack(s, a, o, out, numel, cs);
  if (!PyBool_Check(o) && PyIndex_Check(o)) return from_integer(s, a, o, out);  // numpy.int64
  return arg_error(s, a,
                   "expected a CUDA array (torch tensor, __cuda_array_interface__ or DLPack) or an int device "
                   "pointer, got %s",
                   type_name(o));
}

}  // namespace kg::py::internal
