// Internal to the Python binding support (kernelgen/python.h): the process-wide state and
// the conversions that the launcher object (py_launcher.cpp) shares with the array readers
// (py_arrays.cpp), the scalar and stream conversions (py_scalars.cpp) and the module-level
// functions (py_runtime.cpp). Not installed for generated code.
#pragma once

#include "kernelgen/python.h"
#include "kernelgen/torch_fast.h"

#include <cmath>
#include <cstring>

// The project's Python package (specs/project.yaml), defined by the target's CMake list.
#ifndef KERNELGEN_PACKAGE
#define KERNELGEN_PACKAGE "kernelgen_ops"
#endif

namespace kg::py::internal {

// Exception and Outcome types from the project's package, resolved once per module.
struct Shared {
  PyObject* api = nullptr;  // <package>._api: strict mode and the refresh registry live there
  PyObject* argument_error = nullptr;
  PyObject* launch_error = nullptr;
  PyObject* fatal_error = nullptr;
  PyObject* not_launched = nullptr;
  PyObject* outcome_type = nullptr;
  // torch, resolved on first sight of a torch tensor.
  PyObject* torch_tensor = nullptr;
  PyObject* torch_dtypes[kTorchCount] = {};  // by TorchCode
  TensorReader torch_reader = nullptr;  // kernelgen_ops.<target>._torch_fast, when built
  // torch._C._cuda_getCurrentRawStream, resolved with torch.Tensor: the stream a launch takes when
  // the call names none and an array is a torch tensor.
  PyObject* torch_current_stream = nullptr;
  // interned attribute names
  PyObject* s_data_ptr, *s_dtype, *s_is_contiguous, *s_numel, *s_stride, *s_element_size, *s_get_device, *s_is_cuda;
  PyObject* s_cai, *s_dlpack, *s_dlpack_device, *s_cuda_stream, *s_cuda_stream_proto;
  PyObject* s_data, *s_shape, *s_strides, *s_typestr, *s_stream, *s_version, *s_mask, *s_strict, *s_refreshers;
};
extern Shared g;

// Resolves kernelgen_ops' types and interns the attribute names; idempotent.
int init_shared();

// Raises `type(message)` with the .kernel, .code (and .argument) attributes KernelError documents.
void raise_with(PyObject* type, const char* message, const char* kernel, int32_t code, const char* argument);

// Raises ArgumentError "<kernel>: argument '<name>': <fmt % detail>"; returns -1.
int arg_error(const LauncherSpec* s, const ArgSpec* a, const char* fmt, const char* detail);
// The exception an array producer raised (in `what`, e.g. "__dlpack__()"), raised again as an
// ArgumentError naming the kernel and the argument, the original as its __cause__. Returns -1.
int producer_error(const LauncherSpec* s, const ArgSpec* a, const char* what);

inline const char* type_name(PyObject* o) { return Py_TYPE(o)->tp_name; }

// Bytes of `elements` elements of type `elem`, rounded up to whole bytes (for messages: a count
// whose bytes do not fit in 64 bits gives the largest int64).
inline long long bytes_of(uint8_t elem, int64_t elements) {
  const int64_t bits = kElems[elem].bits;
  const int64_t whole = elements / 8, rest = elements % 8;  // 8 elements are `bits` bytes
  if (whole > (INT64_MAX - bits) / bits) return INT64_MAX;
  return whole * bits + (rest * bits + 7) / 8;
}

// Bytes a typed pointer's address must be a multiple of: a vector type's own alignment (float4:
// 16), else the element's size where it is a power of two of 2 bytes or more (f32: 4, bf16: 2,
// f64 and i64: 8); 1 (no check) for void* and the 8-bit and packed 4-bit types.
inline uint32_t elem_align(uint8_t elem) {
  const ElemInfo& e = kElems[elem];
  if (e.align > 1) return e.align;
  if (e.any_dtype || e.bits < 16 || e.bits % 8 != 0) return 1;
  const uint32_t bytes = e.bits / 8u;
  return (bytes & (bytes - 1)) == 0 ? bytes : 1;
}

// numpy's bool scalar (numpy 2's numpy.bool, numpy 1's numpy.bool_), known by its type's name so
// that numpy need not be imported: it is neither an int nor (in numpy 2) an index.
inline bool is_numpy_bool(PyObject* o) {
  const char* name = Py_TYPE(o)->tp_name;
  return std::strcmp(name, "numpy.bool") == 0 || std::strcmp(name, "numpy.bool_") == 0;
}

// An integer where a pointer or a stream handle is expected: an int (subclasses included, such as
// an IntEnum), not a bool. Objects with __index__ (numpy.int64) are integers too, unless they are
// arrays (a torch tensor, __cuda_array_interface__, DLPack): `as_index` says whether to look.
bool is_integer(PyObject* o, bool as_index);

inline bool is_float_scalar(const ArgSpec& a) { return a.kind == kScalar && kScalars[a.type].kind == kFloat; }

// A scalar of plan(): a scalar argument, or a host integer the launcher reads from a struct (kDerived).
inline bool plan_scalar(const ArgSpec& a) { return a.kind == kScalar || a.kind == kDerived; }

// A scalar that no plan expression reads (grid, block, shared memory, clauses, array sizes):
// plan() may leave it out. A float never is read; an integer (or bool) carries this in
// ArgSpec::nullable, which pointers use for null.
inline bool plan_optional(const ArgSpec& a) {
  return a.kind == kScalar && (a.nullable != 0 || kScalars[a.type].kind == kFloat);
}

// Scalars (py_scalars.cpp): range-checked integers and real numbers. Returns 0, or -1 with
// an error set.
int convert_scalar(const LauncherSpec* s, const ArgSpec* a, PyObject* o, Value* out);

// Structs (py_scalars.cpp): a mapping or an object with the fields as attributes, written in
// the C layout into `buf` (size and alignment of the struct). Returns 0, or -1 with an error set.
int convert_struct(const LauncherSpec* s, const ArgSpec* a, PyObject* o, unsigned char* buf);

// The `stream=` argument: None, an int handle, or a stream object (cuda_stream attribute, the
// __cuda_stream__ protocol, or a CuPy stream's ptr).
struct CallState;

// The stream the call names: an int handle (or an object with __index__, such as numpy.int64) or
// a stream object with .cuda_stream (torch), __cuda_stream__, or a CuPy stream's .ptr; None (or
// nothing) gives the legacy default stream.
int convert_stream(const LauncherSpec* s, PyObject* o, void** out);

// The launch's stream, known before the arrays are read: the one the call names, else torch's
// current stream on the current device when an array is a torch tensor (as torch's own operators
// do). Otherwise it is decided after the arrays (launch_stream).
int early_stream(const LauncherSpec* s, PyObject* stream_obj, PyObject* const* slots, int32_t nslots, CallState* cs);

// Whether one of the arguments is a torch tensor (torch imported and its Tensor type resolved).
bool any_torch_tensor(PyObject* const* slots, int32_t n);

// The launch's stream after the arrays: the early one, else the stream the first array's
// __cuda_array_interface__ names (where the protocol says its data is ready), else the legacy
// default stream.
void* launch_stream(const CallState* cs);

// What one call of a launcher learns once and uses for several arguments: the current device,
// asked of CUDA at most once per call, and only when an array's device is to be checked.
struct CallState {
  int32_t device = -2;  // -2: not asked yet
  bool has_cai_stream = false;  // an array's __cuda_array_interface__ names a stream: the first one's
  uint64_t cai_stream = 0;
  // The launch's stream when known before the arrays are read (named by the call, or torch's
  // current stream): DLPack producers are told it (__dlpack__(stream=...)).
  bool stream_known = false;
  void* stream = nullptr;
  int32_t current_device() { return device != -2 ? device : query_device(); }
  int32_t query_device();
};

// Pointers (py_arrays.cpp): integer device pointers, torch tensors, __cuda_array_interface__
// and DLPack, checked as the spec declares. *numel: elements available, -1 when unknown.
int convert_pointer(const LauncherSpec* s, const ArgSpec* a, PyObject* o, Value* out, int64_t* numel, CallState* cs);

// The element types among elems[0..n) that array `o` can be read as, as a mask of 1 << code;
// ~0u when `o` carries no dtype (an integer pointer) or is no array (the conversion then says
// why). A DLPack producer is told the launch's stream when it is known (cs). Returns 0, or -1
// with an error set.
int array_dtypes(PyObject* o, const uint8_t* elems, int32_t n, uint32_t* mask, const CallState* cs);

// Lanes (elements for non-vector types, bytes for void) of type `elem` in one item of torch dtype
// `torch_code`; 0 when it is not accepted.
inline int torch_per_item(uint8_t elem, int32_t torch_code) {
  const ElemInfo& e = kElems[elem];
  if (e.any_dtype) return torch_code > 0 ? kTorchBits[torch_code] / 8 : 0;
  for (int i = 0; i < e.ntorch; ++i) {
    if (e.torch[i].code == torch_code) return e.torch[i].per_item;
  }
  return 0;
}

// A torch tensor through the C++ reader, when everything about it is right: returns true and
// fills *out and *numel; false sends it to the Python path (from_torch), which explains what
// is wrong or reads what the reader declined.
inline bool read_torch(const ArgSpec* a, PyObject* o, Value* out, int64_t* numel, CallState* cs) {
  TensorView tv;
  if (g.torch_reader(o, &tv) != 1 || tv.device < 0 || (a->contiguous && !tv.contiguous) || tv.negative) return false;
  const int per = torch_per_item(a->type, tv.dtype);
  if (per <= 0 || tv.device != cs->current_device()) return false;
  const ElemInfo& e = kElems[a->type];
  const int64_t lanes = tv.span * per;  // a strided view is counted by the memory it spans
  if (e.lanes > 1 && lanes % e.lanes != 0) return false;
  const uint32_t align = elem_align(a->type);
  if (align > 1 && tv.data % align != 0) return false;
  out->u = tv.data;
  *numel = lanes / e.lanes;
  return true;
}

// The common cases inline, in the launcher's loop: an exact int pointer, a plain torch.Tensor
// the reader accepts. Everything else, and every error, takes convert_pointer.
inline int convert_pointer_fast(const LauncherSpec* s, const ArgSpec* a, PyObject* o, Value* out, int64_t* numel,
                                CallState* cs) {
  if (Py_TYPE(o) == reinterpret_cast<PyTypeObject*>(g.torch_tensor) && g.torch_reader != nullptr &&
      read_torch(a, o, out, numel, cs)) {
    return 0;
  }
  if (PyLong_CheckExact(o)) {
    const unsigned long long p = PyLong_AsUnsignedLongLong(o);
    const uint32_t align = elem_align(a->type);
    if (p != 0 && !(p == static_cast<unsigned long long>(-1) && PyErr_Occurred()) && (align <= 1 || p % align == 0)) {
      *numel = -1;
      out->u = p;
      return 0;
    }
    if (PyErr_Occurred()) PyErr_Clear();  // convert_pointer converts it again and explains
  }
  return convert_pointer(s, a, o, out, numel, cs);
}

// The common scalar cases inline: an exact int in range, an exact float. Everything else, and
// every error, takes convert_scalar.
inline int convert_scalar_fast(const LauncherSpec* s, const ArgSpec* a, PyObject* o, Value* out) {
  const ScalarInfo& info = kScalars[a->type];
  if (info.kind == kBool) return convert_scalar(s, a, o, out);
  if (info.kind == kFloat) {
    // f32: a finite value that rounds to inf there (from 2^128 - 2^103 up) is convert_scalar's
    // error, as is every f16 / bf16 value's range (NaN passes: the comparison is false).
    if (PyFloat_CheckExact(o) && info.bits != 16 &&
        (info.bits == 64 || !(std::fabs(PyFloat_AS_DOUBLE(o)) >= 0x1.ffffffp127))) {
      out->f = PyFloat_AS_DOUBLE(o);
      return 0;
    }
  } else if (PyLong_CheckExact(o)) {
    int overflow = 0;
    const long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
    if (overflow == 0 && v != -1) {
      const bool ok = info.kind == kUnsigned
                          ? v >= 0 && (info.bits >= 64 || v <= static_cast<long long>((1ULL << info.bits) - 1))
                          : info.bits >= 64 || (v >= -(1LL << (info.bits - 1)) && v <= (1LL << (info.bits - 1)) - 1);
      if (ok) {
        out->i = v;
        return 0;
      }
    }
  }
  return convert_scalar(s, a, o, out);
}

// Re-reads the target library's kill switches (kernelgen_ops.refresh() and <target>.refresh()).
PyObject* rt_refresh(PyObject*, PyObject*);

}  // namespace kg::py::internal
