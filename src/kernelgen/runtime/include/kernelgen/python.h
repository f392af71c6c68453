// kernelgen Python binding support: one generic launcher object type, driven by the
// per-kernel tables that the generated pybind11 modules define.
//
// A launcher object is called like the kernel (positional in the spec's argument order or
// by keyword; host arguments keyword-only; `stream=` optional). It converts and checks every
// argument, calls the generated C launcher, and returns a cached Outcome object, or raises
// an exception that names the kernel and the argument.
#pragma once

#include <Python.h>

#include <cstdint>

#include "kernelgen/abi.h"
#include "kernelgen/types.h"

namespace kg::py {

// kDerived: a host integer the launcher reads from a struct argument's field (the spec's `from`):
// not an argument of the call, an integer argument of plan(). Such rows come after the others.
enum ArgKind : uint8_t { kPointer = 1, kScalar = 2, kStruct = 3, kDerived = 4 };

// Scalar and element type codes and their tables, generated from kernelgen's type registry.
using namespace kg::types;

struct ArgSpec {
  const char* name;
  uint8_t kind;          // ArgKind
  uint8_t type;          // ScalarCode, ElemCode, or the index of a struct in LauncherSpec::structs
  uint8_t writable;      // pointer the kernel writes (not const)
  uint8_t contiguous;    // pointer that must be C-contiguous
  int8_t size_slot;      // index into the sizes array, -1 when no size is declared
  uint8_t keyword_only;  // host arguments
  uint8_t nullable;      // pointer that may be null (None or 0): not size-checked then
  uint8_t device_scalar; // a pointer to one element the kernel reads: arrays must have exactly one
  int8_t from_arg;       // kDerived: the struct argument (its index) the value is read from
  uint16_t from_offset;  // kDerived: the field's byte offset in that struct (type: its ScalarCode)
};

// A dtype key of a launcher whose members take different pointer element types: a type axis
// of an instantiated kernel's dispatcher, or a chain argument whose element type differs
// between members. The launcher receives, after the arguments' values, one mask per key of
// the element types (1 << ElemCode) its arrays can be read as.
struct DtypeKey {
  const char* name;  // plan()'s keyword
  uint64_t args;     // bit i: argument i has this key's element type
};

// One field of a struct passed by value: a scalar or a nested struct, or a fixed array of
// `count` of either.
struct StructField {
  const char* name;
  uint8_t type;     // ScalarCode (a scalar field)
  uint16_t count;   // 0: one; n: an array of n
  uint32_t offset;  // bytes from the start of the struct
  int16_t nested;   // -1: a scalar field; else the index of its struct in LauncherSpec::structs
};

// A struct type of the module: Python passes a mapping or an object with these attributes (a
// nested struct's field: a mapping or an object with its own fields).
struct StructSpec {
  const char* name;
  uint32_t size;
  uint32_t align;
  const StructField* fields;
  int32_t nfields;
};

union Value {
  uint64_t u;
  int64_t i;
  double f;
  const void* p;
};

struct LauncherSpec {
  const char* name;
  const char* doc;
  const ArgSpec* args;
  int32_t nargs;
  int32_t npositional;
  int32_t nsizes;
  int32_t (*launch)(const Value* v, void* stream, const kg_kernel_info** ran);
  int32_t (*plan)(const Value* v, kg_plan* out, int32_t* kernel);  // kernel: index into kernels
  int32_t (*sizes)(const Value* v, int64_t* out);  // element counts per size slot
  const kg_kernel_info* const* kernels;            // the kernels this launcher may report
  int32_t nkernels;
  // Dtype keys (nkeys 0: every member takes the same pointer types). With keys, kernels[0 ..
  // nkernels - 2] are the members and kernels[nkernels - 1] the launcher's own description;
  // member_types[m * nkeys + k] is member m's element code for key k (0: it lacks it).
  const DtypeKey* keys;
  int32_t nkeys;
  const uint8_t* member_types;
  // The module's struct types, which struct arguments (kStruct) index by their type.
  const StructSpec* structs;
};

// Prepares the module: imports kernelgen_ops' exception and Outcome types and registers the
// target library's refresh with kernelgen_ops.refresh(). Call first.
int init_module(PyObject* module);

// Adds a launcher object, and a `plan_<name>` alias of its plan method, to the module.
// Returns 0, or -1 with a Python exception set.
int add_launcher(PyObject* module, const LauncherSpec* spec);

// Adds the runtime functions of the target library (refresh, target, devices).
int add_runtime_functions(PyObject* module);

}  // namespace kg::py
