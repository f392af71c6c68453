// The launcher object: one generic type driven by a generated LauncherSpec.
//
// Per call, the work is: match arguments to slots (interned-name identity first), convert
// each (ints range-checked; pointers read from ints, torch tensors, __cuda_array_interface__
// or DLPack, with dtype, device, contiguity, writability and size checks where the spec
// declares them), call the C launcher, and return a cached Outcome. Nothing is allocated on
// the launched path beyond what CPython's own calls allocate.
#include "py_internal.h"

#include <cctype>
#include <cstdio>
#include <cstring>
#include <string>

#include <structmember.h>

namespace kg::py {
using namespace internal;

namespace {

struct Launcher {
  PyObject_HEAD
  vectorcallfunc vectorcall;
  const LauncherSpec* spec;
  PyObject* module_name;
  PyObject** names;            // interned argument names
  PyObject** launched;         // cached "launched" outcomes per kernel
  PyObject* outcomes;          // dict: (kernel index, code) -> Outcome
  PyObject* plan;              // the bound plan method, with this launcher's signature and doc
  int32_t ncall;               // the call's arguments: the rows before the derived ones (kDerived, last)
};

// Matches positional and keyword arguments to slots. `stream` is a keyword of every launcher.
// plan() also takes the launcher's dtype keys (`keys`, by key index) by keyword.
int bind(Launcher* self, PyObject* const* args, size_t nargsf, PyObject* kwnames, PyObject** slots,
         PyObject** stream, bool ints_only, PyObject** keys = nullptr) {
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
    if (keys != nullptr) {
      int32_t k = 0;
      while (k < s->nkeys && PyUnicode_CompareWithASCIIString(key, s->keys[k].name) != 0) ++k;
      if (k < s->nkeys) {
        keys[k] = value;
        continue;
      }
    }
    // Keywords usually come in the spec's order: try the next slot first.
    const Py_ssize_t hint = npos + k;
    int found = hint < s->nargs && self->names[hint] == key ? static_cast<int>(hint) : -1;
    for (int32_t i = 0; i < s->nargs && found < 0; ++i) {
      if (self->names[i] == key) found = i;
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
      PyErr_Format(PyExc_TypeError, "%s%s() got an unexpected keyword argument '%U'", ints_only ? "plan of " : "",
                   s->name, key);
      return -1;
    }
    if (s->args[found].kind == kDerived && !ints_only) {
      const ArgSpec& d = s->args[found];
      PyErr_Format(PyExc_TypeError, "%s() got an unexpected keyword argument '%s': it is read from struct argument "
                   "'%s' (give the struct's field that value)", s->name, d.name, s->args[d.from_arg].name);
      return -1;
    }
    if (slots[found] != nullptr) {
      PyErr_Format(PyExc_TypeError, "%s%s() got multiple values for argument '%s'", ints_only ? "plan of " : "",
                   s->name, s->args[found].name);
      return -1;
    }
    slots[found] = value;
  }
  for (int32_t i = 0; i < s->nargs; ++i) {
    const ArgSpec& a = s->args[i];
    // plan() needs the integer arguments its expressions read; the others may be left out. A call
    // reads the derived ones from their structs.
    const bool needed = ints_only ? (plan_scalar(a) && !plan_optional(a)) : a.kind != kDerived;
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

// The one argument that requires clause `clause` of kernel `k` names (ArgumentError.argument), or
// nullptr when the clause names none or several (device.* and kernel.* names are not arguments).
const char* clause_argument(const kg_kernel_info* k, int32_t clause) {
  if (k == nullptr || k->args == nullptr || k->requires_ == nullptr || clause < 0 || clause >= k->n_requires) {
    return nullptr;
  }
  const char* text = k->requires_[clause];
  const char* found = nullptr;
  for (const char* p = text; *p != '\0';) {
    const auto word = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
    if (!word(*p)) {
      ++p;
      continue;
    }
    const char* start = p;
    while (word(*p)) ++p;
    const bool number = std::isdigit(static_cast<unsigned char>(*start)) != 0;
    if (number || (start > text && start[-1] == '.') || *p == '.') continue;  // 1e5, device.sm_count
    const size_t len = static_cast<size_t>(p - start);
    for (int32_t i = 0; i < k->n_args; ++i) {
      if (std::strlen(k->args[i]) != len || std::strncmp(k->args[i], start, len) != 0) continue;
      if (found != nullptr && std::strcmp(found, k->args[i]) != 0) return nullptr;
      found = k->args[i];
    }
  }
  return found;
}

PyObject* raise_for(Launcher* self, const kg_kernel_info* k, int32_t code) {
  char reason[512];
  kg_rt_describe(k, code, reason, sizeof reason);
  PyObject* type = g.launch_error;
  const int32_t cat = KG_CATEGORY(code);
  const char* argument = nullptr;  // the argument an error's detail names by its position
  if (code > 0) {
    type = g.not_launched;
  } else if (cat == KG_E_REQUIRES || cat == KG_E_EXPR) {
    type = g.argument_error;
    if (cat == KG_E_REQUIRES) argument = clause_argument(k, KG_DETAIL(code));
  } else if (cat == KG_E_DEVICE_SCALAR) {
    type = g.argument_error;
    if (k != nullptr && k->args != nullptr && KG_DETAIL(code) < k->n_args) argument = k->args[KG_DETAIL(code)];
  } else if (cat == KG_E_CUDA && kg_rt_is_sticky_error(KG_DETAIL(code))) {
    type = g.fatal_error;
    std::strncat(reason, " (sticky error: the CUDA context is unusable; restart the process)",
                 sizeof reason - std::strlen(reason) - 1);
  }
  raise_with(type, reason, k ? k->name : self->spec->name, code, argument);
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

// The loader's limits (loader.MAX_LAUNCHER_ARGS, loader.MAX_LAUNCHER_STRUCT_BYTES) are these.
constexpr int kMaxArgs = 64;
constexpr int kMaxStructBytes = 8192;  // struct arguments of one call, each aligned
static_assert(kMaxArgs - 1 <= INT8_MAX, "ArgSpec::size_slot, an int8_t, indexes up to kMaxArgs sizes");
static_assert(kMaxArgs <= 256, "ArgSpec::type, a uint8_t, indexes up to kMaxArgs structs");

// Bytes one call's struct arguments take in its buffer; -1 above kMaxStructBytes.
int32_t struct_bytes(const LauncherSpec* s) {
  int64_t n = 0;
  for (int32_t i = 0; i < s->nargs; ++i) {
    if (s->args[i].kind != kStruct) continue;
    const StructSpec& st = s->structs[s->args[i].type];
    n = (n + st.align - 1) / st.align * st.align + st.size;
  }
  return n > kMaxStructBytes ? -1 : static_cast<int32_t>(n);
}

// A derived argument's value: the integer field at its offset in its struct argument's bytes (the
// C layout the call's struct was packed in), widened as the value slot of its type holds it.
// (The hosts CUDA runs on are little-endian: the field's bytes are the low bytes of the value.)
void read_field(const ArgSpec& a, const unsigned char* st, Value* out) {
  const ScalarInfo& info = kScalars[a.type];
  uint64_t v = 0;
  std::memcpy(&v, st + a.from_offset, info.bits / 8);
  const int shift = 64 - info.bits;  // sign-extends a signed field
  if (info.kind == kSigned) out->i = static_cast<int64_t>(v << shift) >> shift; else out->u = v;
}

// The bits of one lane of element type e (its own bits for a scalar type): f32x4 and f32 share 32.
int32_t lane_bits_of(uint8_t e) { return kElems[e].bits / kElems[e].lanes; }

// Element types a and b take one array as vectors of one lane type and as that type, or as two
// vector widths of it (f32x4 and f32): a dtype reads as both, their counts and alignments differ.
bool lane_relatives(uint8_t a, uint8_t b) {
  return kElems[a].lanes != kElems[b].lanes && lane_bits_of(a) == lane_bits_of(b);
}

bool member_matches(const LauncherSpec* s, int32_t m, const uint32_t* masks) {
  for (int32_t k = 0; k < s->nkeys; ++k) {
    const uint8_t e = s->member_types[m * s->nkeys + k];
    if (e != 0 && (masks[k] & (1u << e)) == 0) return false;
  }
  return true;
}

// For a launcher with dtype keys: each key's mask of the element types its arrays can be read
// as (masks), and the element type each keyed argument is converted and checked as (that of
// the first member the masks admit; elem_of_arg, 0 elsewhere). The arrays' dtypes must tell the
// members left apart: where those members differ in a key's element type (void* aside, which
// takes any array) and the arrays admit several of them (an integer pointer carries no dtype;
// a typestr such as |V1 or |u1 fits fp8_e4m3, fp8_e5m2, u8 ...), the call is refused naming the
// candidates. Except where the element types an array fits are one lane type's vectors and
// perhaps that type itself (f32x4 and f32: a float32 array is either, its count and alignment
// aside): there the members are tried in order, each with its own element types (*by_member set;
// launcher_call). Returns 1 when no member takes the arrays' element types, 0, or -1 with an
// error set.
int pick_dtypes(const LauncherSpec* s, PyObject* const* slots, uint32_t* masks, uint8_t* elem_of_arg,
                const CallState* cs, bool* by_member) {
  const int32_t nmembers = s->nkernels - 1;
  for (int32_t k = 0; k < s->nkeys; ++k) {
    uint8_t cand[32];
    int32_t n = 0;
    for (int32_t m = 0; m < nmembers; ++m) {
      const uint8_t e = s->member_types[m * s->nkeys + k];
      bool seen = e == 0;
      for (int32_t j = 0; j < n && !seen; ++j) seen = cand[j] == e;
      if (!seen && n < 32) cand[n++] = e;
    }
    masks[k] = ~0u;
    for (int32_t i = 0; i < s->nargs; ++i) {
      if (((s->keys[k].args >> i) & 1u) == 0 || slots[i] == nullptr) continue;
      uint32_t mask = 0;
      if (array_dtypes(slots[i], cand, n, &mask, cs) < 0) return -1;
      masks[k] &= mask;
    }
  }
  int32_t first = -1;
  for (int32_t m = 0; m < nmembers && first < 0; ++m) {
    if (member_matches(s, m, masks)) first = m;
  }
  if (first < 0) return 1;
  for (int32_t k = 0; k < s->nkeys; ++k) {
    uint8_t chosen = 0;
    bool differ = false;  // the members left differ in this key's element type
    std::string typed, members;  // their typed element types (void* aside), and a member taking each
    int32_t ntyped = 0, scalars = 0;
    int32_t lane_bits = -1;  // the typed ones' bits a lane, when they agree (else 0)
    uint8_t example = 0;  // a typed candidate with a torch dtype, for the message
    for (int32_t m = first; m < nmembers; ++m) {
      const uint8_t e = s->member_types[m * s->nkeys + k];
      if (e == 0 || !member_matches(s, m, masks)) continue;
      if (chosen == 0) chosen = e;
      differ = differ || e != chosen;
      const std::string quoted = std::string("'") + kElems[e].name + "'";
      if (kElems[e].any_dtype || typed.find(quoted) != std::string::npos) continue;
      typed += (typed.empty() ? "" : ", ") + quoted;
      members += std::string(members.empty() ? "" : ", ") + s->kernels[m]->name;
      if (example == 0 && kElems[e].ntorch > 0) example = e;
      ++ntyped;
      scalars += kElems[e].lanes == 1;
      const int32_t bits = lane_bits_of(e);
      lane_bits = lane_bits < 0 || lane_bits == bits ? bits : 0;
    }
    int32_t named = -1;  // the argument an error names: the first given one that is not None
    for (int32_t i = 0; i < s->nargs; ++i) {
      if (((s->keys[k].args >> i) & 1u) == 0) continue;
      elem_of_arg[i] = chosen;
      if (slots[i] != nullptr && (named < 0 || slots[named] == Py_None)) named = i;
    }
    if (named < 0) continue;
    // An integer pointer (or None) is refused wherever the members differ; an array wherever its
    // dtype fits several typed element types they take (an array of any dtype suits void*).
    const bool untyped = slots[named] == Py_None || is_integer(slots[named], true);
    if (untyped ? !differ : ntyped < 2) continue;
    if (!untyped && lane_bits > 0 && scalars <= 1) {  // one lane type's vectors (and itself)
      *by_member = true;
      continue;
    }
    std::string d = untyped ? "an integer device pointer carries no dtype" : "the arrays' dtype fits several element types";
    d += std::string(", and the kernels this call can launch differ in its element type ") + s->keys[k].name + " (" +
         typed + "); pass an array whose dtype names one (";
    d += example != 0 ? std::string("a torch tensor of torch.") + kTorchAttrs[kElems[example].torch[0].code] + ", say"
                      : std::string("a torch tensor or DLPack");
    d += "), or call one instance directly (" + members + ")";
    return arg_error(s, &s->args[named], "%s", d.c_str());
  }
  return 0;
}

// launcher_call's result for a typing of the arrays that does not serve the call (its arrays'
// count or alignment, or its plan), where the next member's may.
char try_next_tag;
PyObject* const kTryNext = reinterpret_cast<PyObject*>(&try_next_tag);

PyObject* call_typed(Launcher* self, PyObject* const* slots, CallState* cs, bool keyed, const uint32_t* masks,
                     const uint8_t* elem_of_arg, bool more);

PyObject* launcher_call(PyObject* obj, PyObject* const* args, size_t nargsf, PyObject* kwnames) {
  auto* self = reinterpret_cast<Launcher*>(obj);
  const LauncherSpec* s = self->spec;
  PyObject* slots[kMaxArgs];
  for (int32_t i = 0; i < s->nargs; ++i) slots[i] = nullptr;
  PyObject* stream_obj = nullptr;
  if (bind(self, args, nargsf, kwnames, slots, &stream_obj, false) < 0) return nullptr;
  CallState cs;
  if (early_stream(s, stream_obj, slots, s->nargs, &cs) < 0) return nullptr;
  // Launchers with dtype keys: each keyed argument is converted as the element type of the
  // first member its dtype admits (elem_of_arg, set only when keyed).
  const bool keyed = s->nkeys > 0;
  uint8_t elem_of_arg[kMaxArgs];
  uint32_t masks[kMaxArgs];
  bool by_member = false;
  if (keyed) {
    for (int32_t i = 0; i < s->nargs; ++i) elem_of_arg[i] = 0;
    const int rc = pick_dtypes(s, slots, masks, elem_of_arg, &cs, &by_member);
    if (rc < 0) return nullptr;
    if (rc > 0) {
      const int32_t own = s->nkernels - 1;
      return not_launched_or_raise(self, s->kernels[own], own, KG_CODE(KG_NL_NO_INSTANCE, 0));
    }
  }
  if (!by_member) return call_typed(self, slots, &cs, keyed, masks, elem_of_arg, false);
  // Arrays that read as one lane type's vectors or that type (f32x4 or f32): each member's
  // element types in chain order, the first whose arrays suit them (count, alignment) and whose
  // plan launches; the last tried reports.
  const int32_t nmembers = s->nkernels - 1;
  int32_t last = -1;
  for (int32_t m = nmembers - 1; m >= 0 && last < 0; --m) {
    if (member_matches(s, m, masks)) last = m;
  }
  for (int32_t m = 0; m <= last; ++m) {
    if (!member_matches(s, m, masks)) continue;
    bool seen = false;  // an earlier member of the same element types: tried with it
    for (int32_t j = 0; j < m && !seen; ++j) {
      if (!member_matches(s, j, masks)) continue;
      seen = std::memcmp(&s->member_types[j * s->nkeys], &s->member_types[m * s->nkeys], s->nkeys) == 0;
    }
    if (seen) continue;
    uint32_t own[kMaxArgs];
    uint8_t elems[kMaxArgs] = {};  // (0: an argument no key types)
    for (int32_t k = 0; k < s->nkeys; ++k) {
      const uint8_t e = s->member_types[m * s->nkeys + k];
      own[k] = e != 0 ? masks[k] & (1u << e) : masks[k];
      for (int32_t i = 0; i < s->nargs; ++i) {
        if ((s->keys[k].args >> i) & 1u) elems[i] = e != 0 ? e : elem_of_arg[i];
      }
    }
    PyObject* r = call_typed(self, slots, &cs, keyed, own, elems, m < last);
    if (r != kTryNext) return r;
  }
  return nullptr;  // (unreached: the last member's call reports)
}

// The call, its keyed arrays converted as elem_of_arg's element types and its members limited
// to masks' (keyed). With `more`, arrays that do not suit those element types and a plan that does
// not launch give kTryNext, no error.
PyObject* call_typed(Launcher* self, PyObject* const* slots, CallState* cs, bool keyed, const uint32_t* masks,
                     const uint8_t* elem_of_arg, bool more) {
  const LauncherSpec* s = self->spec;
  Value values[2 * kMaxArgs];  // the arguments, then one dtype mask per key
  int64_t numels[kMaxArgs];
  alignas(128) unsigned char struct_buf[kMaxStructBytes];  // struct arguments, in their C layout
  uint32_t struct_used = 0;
  if (keyed) {
    for (int32_t k = 0; k < s->nkeys; ++k) values[s->nargs + k].u = masks[k];
  }
  for (int32_t i = 0; i < self->ncall; ++i) {
    ArgSpec typed;
    const ArgSpec* ap = &s->args[i];
    if (keyed && elem_of_arg[i] != 0) {
      typed = *ap;
      typed.type = elem_of_arg[i];
      ap = &typed;
    }
    const ArgSpec& a = *ap;
    numels[i] = -1;
    int reuse = -1;  // the same array in two slots (out=x): convert it once when the checks agree
    if (a.kind == kPointer && !PyLong_CheckExact(slots[i]) && slots[i] != Py_None) {
      for (int32_t j = 0; j < i && reuse < 0; ++j) {
        const ArgSpec& b = s->args[j];
        const uint8_t btype = keyed && elem_of_arg[j] != 0 ? elem_of_arg[j] : b.type;
        if (slots[j] == slots[i] && b.kind == kPointer && btype == a.type && b.contiguous == a.contiguous &&
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
    if (a.kind == kStruct) {
      const StructSpec& st = s->structs[a.type];
      struct_used = (struct_used + st.align - 1) / st.align * st.align;  // add_launcher checked the total
      if (convert_struct(s, &a, slots[i], struct_buf + struct_used) < 0) return nullptr;
      values[i].p = struct_buf + struct_used;
      struct_used += st.size;
      continue;
    }
    int rc = a.kind == kScalar ? convert_scalar_fast(s, &a, slots[i], &values[i])
                               : convert_pointer_fast(s, &a, slots[i], &values[i], &numels[i], cs);
    if (rc < 0 && more && keyed && elem_of_arg[i] != 0) {  // (its count or alignment for these vectors)
      PyErr_Clear();
      return kTryNext;
    }
    if (rc < 0) return nullptr;
  }
  if (more) {  // the plan of these element types' members
    kg_plan p{};
    int32_t kidx = 0;
    if (s->plan(values, &p, &kidx) != KG_LAUNCHED) return kTryNext;
  }
  for (int32_t i = self->ncall; i < s->nargs; ++i) {  // the derived ones, from their structs
    read_field(s->args[i], static_cast<const unsigned char*>(values[s->args[i].from_arg].p), &values[i]);
    numels[i] = -1;
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
      ArgSpec a = s->args[i];
      if (keyed && elem_of_arg[i] != 0) a.type = elem_of_arg[i];
      if (a.kind != kPointer || a.size_slot < 0 || numels[i] < 0) continue;
      if (a.device_scalar && numels[i] != 1) {
        char d[160];
        std::snprintf(d, sizeof d, "a device scalar is a one-element device array of %s; this array has %lld elements",
                      kElems[a.type].name, (long long)numels[i]);
        arg_error(s, &a, "%s", d);
        return nullptr;
      }
      const int64_t need = sizes[a.size_slot];
      if (need > 0 && numels[i] < need) {
        char d[240];
        std::snprintf(d, sizeof d, "array %s %lld elements but the kernel accesses %lld (of %s: %lld bytes, %lld needed)",
                      a.contiguous ? "has" : "spans", (long long)numels[i], (long long)need, kElems[a.type].name, bytes_of(a.type, numels[i]),
                      bytes_of(a.type, need));
        arg_error(s, &a, "%s", d);
        return nullptr;
      }
    }
  }
  void* stream = launch_stream(cs);
  const kg_kernel_info* ran = nullptr;
  const int32_t code = s->launch(values, stream, &ran);
  if (code == KG_LAUNCHED) {
    return outcome(self, ran ? kernel_index(s, ran) : 0, code);
  }
  return not_launched_or_raise(self, ran, ran ? kernel_index(s, ran) : 0, code);
}

// Each key's mask (masks) narrowed to member m's element type where another member the masks
// admit takes that key as vectors of the same lane type, or as that lane type (f32x4 beside f32).
void narrow_to_lanes(const LauncherSpec* s, int32_t m, Value* masks) {
  for (int32_t k = 0; k < s->nkeys; ++k) {
    const uint8_t e = s->member_types[m * s->nkeys + k];
    if (e == 0) continue;
    for (int32_t j = 0; j < s->nkernels - 1; ++j) {
      const uint8_t o = s->member_types[j * s->nkeys + k];
      if (o == 0 || o == e || (masks[k].u & (1u << o)) == 0) continue;
      if (lane_relatives(o, e)) {
        masks[k].u &= 1u << e;
        break;
      }
    }
  }
}

// plan()'s "sizes": {argument name: element count} of the sized array arguments, or None.
PyObject* plan_sizes(const LauncherSpec* s, const Value* values) {
  PyObject* d = PyDict_New();
  if (d == nullptr || s->nsizes == 0) return d;
  int64_t counts[kMaxArgs];
  if (s->sizes(values, counts) != KG_LAUNCHED) {
    Py_DECREF(d);
    Py_RETURN_NONE;
  }
  for (int32_t i = 0; i < s->nargs; ++i) {
    const ArgSpec& a = s->args[i];
    if (a.kind != kPointer || a.size_slot < 0 || counts[a.size_slot] < 0) continue;
    PyObject* n = PyLong_FromLongLong(counts[a.size_slot]);
    if (n == nullptr || PyDict_SetItemString(d, a.name, n) < 0) {
      Py_XDECREF(n);
      Py_DECREF(d);
      return nullptr;
    }
    Py_DECREF(n);
  }
  return d;
}

PyObject* launcher_plan(PyObject* obj, PyObject* const* args, size_t nargsf, PyObject* kwnames) {
  auto* self = reinterpret_cast<Launcher*>(obj);
  const LauncherSpec* s = self->spec;
  PyObject* slots[kMaxArgs] = {};
  PyObject* unused = nullptr;
  PyObject* keys[kMaxArgs] = {};
  if (bind(self, args, nargsf, kwnames, slots, &unused, true, keys) < 0) return nullptr;
  Value values[2 * kMaxArgs];
  for (int32_t k = 0; k < s->nkeys; ++k) {
    // A key's element type by name (T="bf16"); left out: every member is considered.
    values[s->nargs + k].u = ~0u;
    if (keys[k] == nullptr || keys[k] == Py_None) continue;
    const char* text = PyUnicode_Check(keys[k]) ? PyUnicode_AsUTF8(keys[k]) : nullptr;
    if (text == nullptr) PyErr_Clear();
    int code = 0;
    for (int e = 1; text != nullptr && e < kElemCount && code == 0; ++e) {
      if (std::strcmp(kElems[e].name, text) == 0) code = e;
    }
    if (code == 0) {
      PyErr_Format(PyExc_TypeError, "plan of %s(): %s must name an element type, such as '%s'; got %R", s->name,
                   s->keys[k].name, kElems[s->member_types[k]].name, keys[k]);
      return nullptr;
    }
    values[s->nargs + k].u = 1u << code;
  }
  for (int32_t i = 0; i < s->nargs; ++i) {
    values[i].u = 0;
    const ArgSpec& a = s->args[i];
    if (slots[i] == nullptr) continue;
    if (!plan_scalar(a)) {
      // the argument's own type: a pointer or a struct
      PyErr_Format(PyExc_TypeError, "plan of %s() takes scalar arguments only; got %s%s '%s'", s->name,
                   a.kind == kPointer ? "pointer" : "struct ", a.kind == kPointer ? "" : s->structs[a.type].name,
                   a.name);
      return nullptr;
    }
    if (plan_optional(a) && slots[i] == Py_None) continue;  // unused by the plan: None is leaving it out
    if (is_float_scalar(a)) {
      // No plan reads a float: checked as a launch checks it, then left out.
      Value unused_value;
      if (convert_scalar(s, &a, slots[i], &unused_value) < 0) return nullptr;
      continue;
    }
    if (convert_scalar(s, &a, slots[i], &values[i]) < 0) return nullptr;
  }
  kg_plan p{};
  int32_t kidx = 0;
  const int32_t code = s->plan(values, &p, &kidx);
  char reason[512] = "";
  if (code != KG_LAUNCHED) kg_rt_describe(s->kernels[kidx], code, reason, sizeof reason);
  PyObject* result = Py_BuildValue("{s:(LLL),s:(LLL),s:L,s:O,s:i,s:s,s:s,s:i}", "grid", p.grid[0], p.grid[1],
                                   p.grid[2], "block", p.block[0], p.block[1], p.block[2], "shared_mem", p.shared_mem,
                                   "launched", code == KG_LAUNCHED ? Py_True : Py_False, "code", code, "reason",
                                   reason, "kernel", s->kernels[kidx]->name, "variant", p.variant);
  if (result == nullptr) return nullptr;
  // cluster: the launch's cluster dimensions (the spec's cluster or launch.cluster), None for a
  // launch without one (or a plan that stopped before its geometry).
  PyObject* cluster = p.cluster[0] == 0 ? Py_NewRef(Py_None)
                                        : Py_BuildValue("(LLL)", p.cluster[0], p.cluster[1], p.cluster[2]);
  if (cluster == nullptr || PyDict_SetItemString(result, "cluster", cluster) < 0) {
    Py_XDECREF(cluster);
    Py_DECREF(result);
    return nullptr;
  }
  Py_DECREF(cluster);
  // sizes: the element count each sized array must have at least, by argument name (a chain:
  // the largest over the members that apply), so callers allocate workspaces from the spec;
  // None when a size expression fails for these arguments. Members that take one array as
  // vectors of another's lane type (f32x4, f32) count different things: those of the planned
  // member's element types only.
  if (s->nkeys > 0 && kidx < s->nkernels - 1) narrow_to_lanes(s, kidx, values + s->nargs);
  PyObject* sizes = plan_sizes(s, values);
  if (sizes == nullptr || PyDict_SetItemString(result, "sizes", sizes) < 0) {
    Py_XDECREF(sizes);
    Py_DECREF(result);
    return nullptr;
  }
  Py_DECREF(sizes);
  return result;
}

PyObject* plan_method(PyObject* self, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  return launcher_plan(self, args, static_cast<size_t>(nargs), kwnames);
}

void launcher_dealloc(PyObject* obj) {
  auto* self = reinterpret_cast<Launcher*>(obj);
  Py_XDECREF(self->outcomes);
  Py_XDECREF(self->module_name);
  Py_XDECREF(self->plan);
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
  const int32_t n = reinterpret_cast<Launcher*>(obj)->ncall;  // the derived ones are not the call's
  PyObject* t = PyTuple_New(n);
  if (t == nullptr) return nullptr;
  for (int32_t i = 0; i < n; ++i) {
    PyObject* n = PyUnicode_FromString(s->args[i].name);
    if (n == nullptr) {
      Py_DECREF(t);
      return nullptr;
    }
    PyTuple_SET_ITEM(t, i, n);
  }
  return t;
}

PyObject* get_plan(PyObject* obj, void*) {
  PyObject* plan = reinterpret_cast<Launcher*>(obj)->plan;
  Py_INCREF(plan);
  return plan;
}

// inspect.signature(launcher): the call's parameters in order (kernel arguments positional or by
// keyword, host arguments and stream keyword-only), annotated with the docstring's spec types.
PyObject* get_signature(PyObject* obj, void*) {
  auto* self = reinterpret_cast<Launcher*>(obj);
  PyObject* names = get_args(obj, nullptr);
  if (names == nullptr) return nullptr;
  PyObject* sig = PyObject_CallMethod(g.api, "_launcher_signature", "Ois", names, self->spec->npositional,
                                      self->spec->doc);
  Py_DECREF(names);
  return sig;
}

// plan()'s docstring, its first line a text signature (as CPython's builtins spell it) so that
// help() and inspect.signature show the arguments it takes: the scalar arguments, those its
// expressions do not use (floats among them) defaulting to None, then the dtype keys.
std::string plan_doc(const LauncherSpec* s) {
  std::string params, listed;
  for (int32_t i = 0; i < s->nargs; ++i) {
    const ArgSpec& a = s->args[i];
    if (!plan_scalar(a)) continue;
    params += std::string(", ") + a.name + (plan_optional(a) ? "=None" : "");
    listed += std::string(listed.empty() ? "" : "; ") + a.name + " (" + kScalars[a.type].name +
              (plan_optional(a) ? ", not used by the plan: may be left out)" : ")");
  }
  for (int32_t k = 0; k < s->nkeys; ++k) {
    params += std::string(", ") + s->keys[k].name + "=None";
    std::string names;
    for (int32_t m = 0; m + 1 < s->nkernels; ++m) {
      const uint8_t e = s->member_types[m * s->nkeys + k];
      const std::string quoted = std::string("'") + kElems[e].name + "'";
      if (e != 0 && names.find(quoted) == std::string::npos) names += (names.empty() ? "" : ", ") + quoted;
    }
    listed += std::string(listed.empty() ? "" : "; ") + s->keys[k].name + " (an element type name: " + names +
              "; left out: every instance is considered)";
  }
  std::string doc = "plan($self, /" + (params.empty() ? std::string() : ", *" + params) + ")\n--\n\n";
  doc += std::string("The launch plan of ") + s->name +
         "() for these arguments (a float is checked as a launch checks it, then left out: no plan reads one), "
         "without a GPU: a dict of grid, block, shared_mem, launched, code, "
         "reason (why not, when not launched), kernel, variant, cluster (the launch's cluster dimensions, None without "
         "one) and sizes (the element count of each sized array "
         "argument; one whose size comes out negative is left out; None when a size expression fails).";
  if (!listed.empty()) doc += "\n\nArguments: " + listed + ".";
  return doc;
}

// A launcher is a module-level object, copied and pickled as functions are: copy.copy and
// copy.deepcopy give the launcher itself, and it pickles by reference, as <package>._api's
// _attribute(module, name), which imports the module where it is unpickled.
PyObject* launcher_reduce(PyObject* obj, PyObject*) {
  auto* self = reinterpret_cast<Launcher*>(obj);
  PyObject* load = PyObject_GetAttrString(g.api, "_attribute");
  if (load == nullptr) return nullptr;
  return Py_BuildValue("(N(Os))", load, self->module_name, self->spec->name);
}

PyObject* launcher_copy(PyObject* obj, PyObject*) {
  Py_INCREF(obj);
  return obj;
}

PyMethodDef launcher_methods[] = {
    {"__reduce__", launcher_reduce, METH_NOARGS, "Pickles the launcher by reference: its module and name."},
    {"__copy__", launcher_copy, METH_NOARGS, "The launcher itself (as copy.copy gives for a function)."},
    {"__deepcopy__", launcher_copy, METH_O, "The launcher itself (as copy.deepcopy gives for a function)."},
    {nullptr, nullptr, 0, nullptr}};

PyGetSetDef launcher_getset[] = {
    {"__doc__", get_doc, nullptr, nullptr, nullptr},
    {"__name__", get_name, nullptr, nullptr, nullptr},
    {"__signature__", get_signature, nullptr, nullptr, nullptr},
    {"plan", get_plan, nullptr, "the launch plan for integer arguments (see its own docstring)", nullptr},
    {"arg_names", get_args, nullptr, "argument names, kernel arguments first, then host arguments", nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr}};

PyTypeObject* launcher_type() {
  static PyTypeObject* type = nullptr;
  if (type != nullptr) return type;
  static PyType_Slot slots[] = {
      {Py_tp_dealloc, reinterpret_cast<void*>(launcher_dealloc)},
      {Py_tp_repr, reinterpret_cast<void*>(launcher_repr)},
      {Py_tp_call, reinterpret_cast<void*>(PyVectorcall_Call)},
      {Py_tp_getset, launcher_getset},
      {Py_tp_methods, launcher_methods},
      {0, nullptr}};
  static PyMemberDef members[] = {
      {"__vectorcalloffset__", T_PYSSIZET, offsetof(Launcher, vectorcall), READONLY, nullptr},
      {nullptr, 0, 0, 0, nullptr}};
  static PyType_Slot all_slots[8];
  int n = 0;
  for (; slots[n].slot != 0; ++n) all_slots[n] = slots[n];
  all_slots[n++] = {Py_tp_members, members};
  all_slots[n] = {0, nullptr};
  static PyType_Spec spec = {KERNELGEN_PACKAGE ".Launcher", sizeof(Launcher), 0,
                             Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL, all_slots};
  type = reinterpret_cast<PyTypeObject*>(PyType_FromSpec(&spec));
  return type;
}

}  // namespace

int add_launcher(PyObject* module, const LauncherSpec* spec) {
  if (spec->nargs > kMaxArgs || spec->nkeys > kMaxArgs) {
    PyErr_Format(PyExc_RuntimeError, "%s: more than %d arguments", spec->name, kMaxArgs);
    return -1;
  }
  if (struct_bytes(spec) < 0) {
    PyErr_Format(PyExc_RuntimeError, "%s: struct arguments over %d bytes", spec->name, kMaxStructBytes);
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
  self->plan = nullptr;
  self->ncall = spec->nargs;
  while (self->ncall > 0 && spec->args[self->ncall - 1].kind == kDerived) --self->ncall;
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
  // plan: a method of this launcher alone, whose docstring and signature list its arguments
  // (like the launcher, it lives as long as the process).
  const std::string doc = plan_doc(spec);
  char* doc_text = new char[doc.size() + 1];
  std::memcpy(doc_text, doc.c_str(), doc.size() + 1);
  auto* def = new PyMethodDef{"plan", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(plan_method)),
                              METH_FASTCALL | METH_KEYWORDS, doc_text};
  self->plan = PyCFunction_NewEx(def, reinterpret_cast<PyObject*>(self), self->module_name);
  if (self->plan == nullptr) return -1;
  PyObject* plan = self->plan;
  Py_INCREF(plan);
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

}  // namespace kg::py
