// Scalar arguments (range-checked integers, real numbers) and the `stream=` argument.
#include "py_internal.h"

#include <cmath>
#include <cstdio>
#include <cstring>

namespace kg::py::internal {

namespace {

// A double rounded once, to nearest even, to a 16-bit float with `mant` fraction bits (f16: 10,
// bf16: 7) and 15 - mant exponent bits: its bit pattern. Beyond the largest finite value it is
// +-inf; NaN stays NaN (quiet); subnormals are kept.
uint16_t round_to_16(double d, int mant) {
  const int exp_bits = 15 - mant;
  const int bias = (1 << (exp_bits - 1)) - 1;
  const uint16_t sign = std::signbit(d) ? 0x8000u : 0u;
  const uint16_t inf = static_cast<uint16_t>(((1u << exp_bits) - 1) << mant);
  if (std::isnan(d)) return static_cast<uint16_t>(sign | inf | (1u << (mant - 1)));
  const double x = std::fabs(d);
  if (std::isinf(x)) return sign | inf;
  if (x == 0.0) return sign;
  int e = 0;
  std::frexp(x, &e);  // x = m * 2^e, m in [0.5, 1): its exponent as 1.f * 2^E is E = e - 1
  const int E = e - 1;
  if (E > bias) return sign | inf;
  const int emin = 1 - bias;
  const int q_exp = (E < emin ? emin : E) - mant;  // the exponent of one unit in the last place
  const double q = std::ldexp(x, -q_exp);          // exact: a power-of-two scaling
  double r = std::floor(q);
  const double frac = q - r;
  if (frac > 0.5 || (frac == 0.5 && std::fmod(r, 2.0) != 0.0)) r += 1.0;
  uint32_t bits = 0;
  if (E < emin) {
    bits = static_cast<uint32_t>(r);  // subnormal (r = 2^mant is the smallest normal's pattern)
  } else {
    bits = (static_cast<uint32_t>(E + bias) << mant) + (static_cast<uint32_t>(r) - (1u << mant));
  }
  if (bits >= inf) return sign | inf;
  return static_cast<uint16_t>(sign | bits);
}

// The exponent bias of a float format of `bits` bits with `mant` fraction bits (one sign bit, the
// rest exponent): f32 127, f16 15, bf16 127, f64 1023.
int float_bias(const ScalarInfo& info) { return (1 << (info.bits - 2 - info.mant)) - 1; }

// Whether the finite double `d` lies beyond the float format's largest finite value by half a unit
// in its last place or more, so rounding it to nearest even gives infinity (f64 holds every double).
bool rounds_to_inf(double d, const ScalarInfo& info) {
  if (info.bits >= 64 || !std::isfinite(d)) return false;
  return std::fabs(d) >= std::ldexp(2.0 - std::ldexp(1.0, -(info.mant + 1)), float_bias(info));
}

// The ArgumentError of a finite number that the float type cannot hold (rounding it would give
// infinity, or it is an int beyond every double): its value, and the type's largest finite value.
int float_range_error(const LauncherSpec* s, const ArgSpec* a, PyObject* o, const ScalarInfo& info) {
  PyObject* str = PyObject_Str(o);
  const char* text = str ? PyUnicode_AsUTF8(str) : nullptr;
  if (text == nullptr) PyErr_Clear();
  const double largest = std::ldexp(2.0 - std::ldexp(1.0, -info.mant), float_bias(info));
  char detail[300];
  std::snprintf(detail, sizeof detail,
                "%.60s%s is out of range for %s (finite values up to %.8g in magnitude; pass float('inf') for "
                "infinity)",
                text ? text : "the number", text && std::strlen(text) > 60 ? "..." : "", info.name, largest);
  Py_XDECREF(str);
  return arg_error(s, a, "%s", detail);
}

}  // namespace

int convert_scalar(const LauncherSpec* s, const ArgSpec* a, PyObject* o, Value* out) {
  const ScalarInfo& info = kScalars[a->type];
  if (info.kind == kBool) {  // True/False, or the integers 0 and 1 (what plans and clauses see)
    if (PyBool_Check(o)) {
      out->u = o == Py_True ? 1 : 0;
      return 0;
    }
    if (is_numpy_bool(o)) {
      const int truth = PyObject_IsTrue(o);
      if (truth < 0) return -1;
      out->u = static_cast<uint64_t>(truth);
      return 0;
    }
    if (!PyFloat_Check(o)) {
      PyObject* idx = PyNumber_Index(o);
      if (idx != nullptr) {
        int overflow = 0;
        const long long v = PyLong_AsLongLongAndOverflow(idx, &overflow);
        Py_DECREF(idx);
        if (overflow == 0 && (v == 0 || v == 1)) {
          out->u = static_cast<uint64_t>(v);
          return 0;
        }
      }
      PyErr_Clear();
    }
    return arg_error(s, a, "expected a bool (True, False, 0 or 1), got %s", type_name(o));
  }
  if (PyBool_Check(o)) return arg_error(s, a, "expected %s, got bool", info.name);
  if (is_numpy_bool(o)) return arg_error(s, a, "expected %s, got numpy.bool", info.name);
  if (info.kind == kFloat) {
    // Any real number: float, int, numpy scalars (through __float__ or __index__).
    PyNumberMethods* nb = Py_TYPE(o)->tp_as_number;
    if (!PyFloat_Check(o) && !PyLong_Check(o) && (nb == nullptr || (nb->nb_float == nullptr && nb->nb_index == nullptr))) {
      return arg_error(s, a, "expected a number, got %s", type_name(o));
    }
    const double d = PyFloat_AsDouble(o);
    if (d == -1.0 && PyErr_Occurred()) {
      if (!PyErr_ExceptionMatches(PyExc_OverflowError)) return producer_error(s, a, "__float__");
      PyErr_Clear();  // an int beyond every double
      return float_range_error(s, a, o, info);
    }
    if (rounds_to_inf(d, info)) return float_range_error(s, a, o, info);  // inf and nan themselves pass
    if (info.bits == 16) {
      out->u = round_to_16(d, info.mant);  // f16/bf16: the C ABI takes the bits
    } else {
      out->f = d;
    }
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

// torch's current stream on `device` (torch._C._cuda_getCurrentRawStream, resolved with
// torch.Tensor), or the legacy default stream (null) where this torch lacks it or the call fails.
void* torch_current_stream(int32_t device) {
  if (g.torch_current_stream == nullptr || device < 0) return nullptr;
  PyObject* dev = PyLong_FromLong(device);  // a small int: CPython's cached object
  PyObject* r = dev != nullptr ? PyObject_CallOneArg(g.torch_current_stream, dev) : nullptr;
  Py_XDECREF(dev);
  unsigned long long h = 0;
  if (r != nullptr && PyLong_Check(r)) h = PyLong_AsUnsignedLongLong(r);
  Py_XDECREF(r);
  if (PyErr_Occurred()) {
    PyErr_Clear();
    h = 0;
  }
  return reinterpret_cast<void*>(static_cast<uintptr_t>(h));
}

int early_stream(const LauncherSpec* s, PyObject* stream_obj, PyObject* const* slots, int32_t nslots, CallState* cs) {
  if (stream_obj != nullptr && stream_obj != Py_None) {
    if (convert_stream(s, stream_obj, &cs->stream) < 0) return -1;
    cs->stream_known = true;
    return 0;
  }
  // No stream named: a torch tensor among the arrays means torch's current stream, so a launch
  // inside `with torch.cuda.stream(...)` or a graph capture goes there.
  if (any_torch_tensor(slots, nslots)) {
    cs->stream = torch_current_stream(cs->current_device());
    cs->stream_known = true;
  }
  return 0;
}

void* launch_stream(const CallState* cs) {
  if (cs->stream_known) return cs->stream;
  if (cs->has_cai_stream) return reinterpret_cast<void*>(static_cast<uintptr_t>(cs->cai_stream));
  return nullptr;
}

namespace {

// A CuPy stream (cupy.cuda.Stream, ExternalStream, or a subclass: a class named *Stream* of a
// cupy module in its MRO): its handle is its `ptr`.
bool is_cupy_stream(PyObject* o) {
  PyObject* mro = Py_TYPE(o)->tp_mro;
  bool found = false;
  for (Py_ssize_t i = 0; !found && mro != nullptr && PyTuple_Check(mro) && i < PyTuple_GET_SIZE(mro); ++i) {
    PyObject* type = PyTuple_GET_ITEM(mro, i);
    PyObject* module = PyObject_GetAttrString(type, "__module__");
    PyObject* name = module != nullptr ? PyObject_GetAttrString(type, "__name__") : nullptr;
    const char* m = module != nullptr && PyUnicode_Check(module) ? PyUnicode_AsUTF8(module) : nullptr;
    const char* n = name != nullptr && PyUnicode_Check(name) ? PyUnicode_AsUTF8(name) : nullptr;
    found = m != nullptr && n != nullptr && (std::strcmp(m, "cupy") == 0 || std::strncmp(m, "cupy.", 5) == 0) &&
            std::strstr(n, "Stream") != nullptr;
    Py_XDECREF(name);
    Py_XDECREF(module);
    PyErr_Clear();
  }
  return found;
}

}  // namespace

int convert_stream(const LauncherSpec* s, PyObject* o, void** out) {
  *out = nullptr;
  if (o == nullptr || o == Py_None) return 0;
  PyObject* handle = nullptr;
  if (PyLong_Check(o) && !PyBool_Check(o)) {
    handle = o;
    Py_INCREF(handle);
  } else if ((handle = PyObject_GetAttr(o, g.s_cuda_stream)) != nullptr) {
    // torch.cuda.Stream: a plain attribute, cheaper than the protocol call.
  } else if (PyErr_Clear(), PyObject_HasAttr(o, g.s_cuda_stream_proto)) {
    PyObject* t = PyObject_CallMethodNoArgs(o, g.s_cuda_stream_proto);
    if (t == nullptr) return -1;
    if (PyTuple_Check(t) && PyTuple_GET_SIZE(t) == 2) {
      handle = PyTuple_GET_ITEM(t, 1);
      Py_INCREF(handle);
    }
    Py_DECREF(t);
  } else if (is_integer(o, true)) {  // numpy.int64 and other objects with __index__
    handle = PyNumber_Index(o);
    if (handle == nullptr) PyErr_Clear();
  } else if (is_cupy_stream(o)) {
    handle = PyObject_GetAttrString(o, "ptr");
    if (handle == nullptr) PyErr_Clear();
  }
  if (handle == nullptr || !PyLong_Check(handle) || PyBool_Check(handle)) {
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

// ---- structs passed by value

namespace kg::py::internal {
namespace {

int fill_struct(const LauncherSpec* s, const ArgSpec* a, const StructSpec& st, const char* prefix, PyObject* o,
                unsigned char* buf);

// One scalar of a struct field, written in the C layout at `dst`; `name` is the field's name in
// messages ("n", "tag[2]", "window.left"). The value is read as a scalar argument of the field's
// type would be (convert_scalar: True, False, 0 or 1 for a bool; no bool for a number), and an
// error keeps its detail after the field's name. Returns 0, or -1 with an ArgumentError naming it.
int struct_scalar(const LauncherSpec* s, const ArgSpec* a, const StructField& f, const char* name, PyObject* v,
                  unsigned char* dst) {
  const ScalarInfo& info = kScalars[f.type];
  ArgSpec as_scalar = *a;  // the scalar reader's checks, its message naming the field
  as_scalar.kind = kScalar;
  as_scalar.type = f.type;
  Value out{};
  if (convert_scalar(s, &as_scalar, v, &out) < 0) {
    PyObject *type = nullptr, *value = nullptr, *tb = nullptr;
    PyErr_Fetch(&type, &value, &tb);
    PyObject* text = value ? PyObject_Str(value) : nullptr;
    const char* t = text ? PyUnicode_AsUTF8(text) : nullptr;
    // "<kernel>: argument '<name>': <detail>": keep the detail, put the field before it.
    const char* cut = t ? std::strstr(t, "': ") : nullptr;
    char detail[400];
    std::snprintf(detail, sizeof detail, "field '%s': %s", name, cut ? cut + 3 : "invalid value");
    Py_XDECREF(text);
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(tb);
    PyErr_Clear();
    return arg_error(s, a, "%s", detail);
  }
  if (info.kind == kFloat && info.bits == 32) {
    const float x = static_cast<float>(out.f);
    std::memcpy(dst, &x, sizeof x);
  } else if (info.kind == kFloat && info.bits == 64) {
    std::memcpy(dst, &out.f, sizeof out.f);
  } else {  // integers and bool; f16/bf16 as their bits (rounded once by convert_scalar)
    std::memcpy(dst, &out.u, info.bits / 8);  // little-endian: the low bytes hold the value
  }
  return 0;
}

// One element of a struct field (element `index` of an array field, -1 for a plain field): a
// scalar, or a nested struct (a mapping or an object with its fields as attributes).
int struct_element(const LauncherSpec* s, const ArgSpec* a, const StructField& f, const char* prefix, int index,
                   PyObject* v, unsigned char* dst) {
  char name[160];
  if (index >= 0) {
    std::snprintf(name, sizeof name, "%s%s[%d]", prefix, f.name, index);
  } else {
    std::snprintf(name, sizeof name, "%s%s", prefix, f.name);
  }
  if (f.nested < 0) return struct_scalar(s, a, f, name, v, dst);
  std::strncat(name, ".", sizeof name - std::strlen(name) - 1);
  return fill_struct(s, a, s->structs[f.nested], name, v, dst);
}

int struct_field(const LauncherSpec* s, const ArgSpec* a, const StructField& f, const char* prefix, PyObject* v,
                 unsigned char* dst) {
  if (f.count == 0) return struct_element(s, a, f, prefix, -1, v, dst);
  const char* type = f.nested < 0 ? kScalars[f.type].name : s->structs[f.nested].name;
  const uint32_t step = f.nested < 0 ? kScalars[f.type].bits / 8 : s->structs[f.nested].size;
  char detail[400];
  PyObject* seq = (PyUnicode_Check(v) || PyBytes_Check(v)) ? nullptr : PySequence_Fast(v, "");
  if (seq == nullptr) {
    PyErr_Clear();
    std::snprintf(detail, sizeof detail, "field '%s%s': expected a sequence of %d %s values, got %s", prefix, f.name,
                  f.count, type, type_name(v));
    return arg_error(s, a, "%s", detail);
  }
  const Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
  if (n != f.count) {
    Py_DECREF(seq);
    std::snprintf(detail, sizeof detail, "field '%s%s': expected %d values, got %zd", prefix, f.name, f.count, n);
    return arg_error(s, a, "%s", detail);
  }
  for (Py_ssize_t i = 0; i < n; ++i) {
    if (struct_element(s, a, f, prefix, static_cast<int>(i), PySequence_Fast_GET_ITEM(seq, i), dst + i * step) < 0) {
      Py_DECREF(seq);
      return -1;
    }
  }
  Py_DECREF(seq);
  return 0;
}

// The names of the struct's fields, for messages: "v0, v1".
void field_list(const StructSpec& st, char* out, size_t n) {
  out[0] = '\0';
  for (int32_t i = 0; i < st.nfields; ++i) {
    if (i > 0) std::strncat(out, ", ", n - std::strlen(out) - 1);
    std::strncat(out, st.fields[i].name, n - std::strlen(out) - 1);
  }
}

// "field 'window': " for a nested struct at `prefix` "window.", "" for the argument itself.
void nested_where(const char* prefix, char* out, size_t n) {
  const size_t len = std::strlen(prefix);
  if (len == 0) {
    out[0] = '\0';
  } else {
    std::snprintf(out, n, "field '%.*s': ", static_cast<int>(len - 1), prefix);
  }
}

// Keys of `names` (a mapping's keys or a dataclass's fields) that are not fields of `st`: an
// error naming the first. Returns 0, or -1 with an error set.
int no_extra_fields(const LauncherSpec* s, const ArgSpec* a, const StructSpec& st, const char* prefix,
                    PyObject* names) {
  PyObject* it = PyObject_GetIter(names);
  if (it == nullptr) return -1;
  PyObject* key;
  while ((key = PyIter_Next(it)) != nullptr) {
    const char* k = PyUnicode_Check(key) ? PyUnicode_AsUTF8(key) : nullptr;
    bool known = false;
    for (int32_t i = 0; k != nullptr && i < st.nfields && !known; ++i) known = std::strcmp(st.fields[i].name, k) == 0;
    if (!known) {
      PyErr_Clear();
      PyObject* r = PyObject_Repr(key);
      char list[300], where[200], detail[700];
      field_list(st, list, sizeof list);
      nested_where(prefix, where, sizeof where);
      std::snprintf(detail, sizeof detail, "%sunknown field %.80s for struct %s (its fields: %s)", where,
                    r ? PyUnicode_AsUTF8(r) : "?", st.name, list);
      Py_XDECREF(r);
      Py_DECREF(key);
      Py_DECREF(it);
      PyErr_Clear();
      return arg_error(s, a, "%s", detail);
    }
    Py_DECREF(key);
  }
  Py_DECREF(it);
  return PyErr_Occurred() ? -1 : 0;
}

// Struct `st` at `buf` from `o` (a mapping or an object with the fields as attributes); `prefix`
// is its path in messages ("" for the argument, "window." for a nested struct).
int fill_struct(const LauncherSpec* s, const ArgSpec* a, const StructSpec& st, const char* prefix, PyObject* o,
                unsigned char* buf) {
  char list[300], where[200], detail[700];
  const bool mapping = PyDict_Check(o) || (!PyUnicode_Check(o) && PyObject_HasAttrString(o, "keys") &&
                                           PyObject_HasAttrString(o, "__getitem__"));
  // Numbers, text, None and plain sequences (a tuple or list of the field values: which value is
  // which field is not said) are no struct. A namedtuple is an object with the fields.
  if (PyLong_Check(o) || PyFloat_Check(o) || PyUnicode_Check(o) || o == Py_None || PyTuple_CheckExact(o) ||
      PyList_Check(o) || PyBytes_Check(o) || PyByteArray_Check(o)) {
    field_list(st, list, sizeof list);
    nested_where(prefix, where, sizeof where);
    std::snprintf(detail, sizeof detail, "%sexpected struct %s: a mapping or an object with the fields %s, got %s",
                  where, st.name, list, type_name(o));
    return arg_error(s, a, "%s", detail);
  }
  if (mapping) {
    PyObject* keys = PyMapping_Keys(o);
    if (keys == nullptr) return producer_error(s, a, "keys()");
    const int rc = no_extra_fields(s, a, st, prefix, keys);
    Py_DECREF(keys);
    if (rc < 0) return -1;
  } else {
    PyObject* dc = PyObject_GetAttrString(o, "__dataclass_fields__");
    if (dc == nullptr) {
      PyErr_Clear();
    } else {
      const int rc = PyDict_Check(dc) ? no_extra_fields(s, a, st, prefix, dc) : 0;
      Py_DECREF(dc);
      if (rc < 0) return -1;
    }
  }
  for (int32_t i = 0; i < st.nfields; ++i) {
    const StructField& f = st.fields[i];
    PyObject* v = mapping ? PyMapping_GetItemString(o, f.name) : PyObject_GetAttrString(o, f.name);
    if (v == nullptr) {
      if (!PyErr_ExceptionMatches(PyExc_KeyError) && !PyErr_ExceptionMatches(PyExc_AttributeError)) {
        return producer_error(s, a, mapping ? "__getitem__" : "getattr");
      }
      PyErr_Clear();
      field_list(st, list, sizeof list);
      std::snprintf(detail, sizeof detail, "field '%s%s' of struct %s is missing (its fields: %s)", prefix, f.name,
                    st.name, list);
      return arg_error(s, a, "%s", detail);
    }
    const int rc = struct_field(s, a, f, prefix, v, buf + f.offset);
    Py_DECREF(v);
    if (rc < 0) return -1;
  }
  return 0;
}

}  // namespace

int convert_struct(const LauncherSpec* s, const ArgSpec* a, PyObject* o, unsigned char* buf) {
  const StructSpec& st = s->structs[a->type];
  std::memset(buf, 0, st.size);
  return fill_struct(s, a, st, "", o, buf);
}

}  // namespace kg::py::internal
