// Process-wide state of the binding support (kernelgen_ops' exception and Outcome types,
// interned names), error raising, and the module-level functions of each target's
// `_runtime` module; init_module and add_runtime_functions of kernelgen/python.h.
#include "py_internal.h"

#include <cstdio>

namespace kg::py {
namespace internal {

Shared g;

int init_shared() {
  if (g.outcome_type != nullptr) return 0;
  PyObject* mod = PyImport_ImportModule(KERNELGEN_PACKAGE "._api");
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
  KG_INTERN(s_stride, "stride")
  KG_INTERN(s_element_size, "element_size")
  KG_INTERN(s_get_device, "get_device")
  KG_INTERN(s_is_cuda, "is_cuda")
  KG_INTERN(s_cai, "__cuda_array_interface__")
  KG_INTERN(s_dlpack, "__dlpack__")
  KG_INTERN(s_dlpack_device, "__dlpack_device__")
  KG_INTERN(s_cuda_stream, "cuda_stream")
  KG_INTERN(s_cuda_stream_proto, "__cuda_stream__")
  KG_INTERN(s_data, "data")
  KG_INTERN(s_shape, "shape")
  KG_INTERN(s_strides, "strides")
  KG_INTERN(s_typestr, "typestr")
  KG_INTERN(s_stream, "stream")
  KG_INTERN(s_version, "version")
  KG_INTERN(s_mask, "mask")
  KG_INTERN(s_strict, "STRICT")
  KG_INTERN(s_refreshers, "_refreshers")
#undef KG_INTERN
  return 0;
}

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

int producer_error(const LauncherSpec* s, const ArgSpec* a, const char* what) {
  PyObject *type = nullptr, *value = nullptr, *tb = nullptr;
  PyErr_Fetch(&type, &value, &tb);
  PyErr_NormalizeException(&type, &value, &tb);
  PyObject* text = value ? PyObject_Str(value) : nullptr;
  const char* msg = text ? PyUnicode_AsUTF8(text) : nullptr;
  char d[480];
  std::snprintf(d, sizeof d, "%s raised %s: %.360s", what,
                type ? reinterpret_cast<PyTypeObject*>(type)->tp_name : "an exception", msg ? msg : "");
  Py_XDECREF(text);
  PyErr_Clear();
  arg_error(s, a, "%s", d);
  if (value != nullptr) {  // chain the producer's exception as the cause
    PyObject *t2 = nullptr, *v2 = nullptr, *tb2 = nullptr;
    PyErr_Fetch(&t2, &v2, &tb2);
    PyErr_NormalizeException(&t2, &v2, &tb2);
    if (v2 != nullptr) {
      Py_INCREF(value);
      PyException_SetCause(v2, value);  // steals the reference
    }
    PyErr_Restore(t2, v2, tb2);
  }
  Py_XDECREF(type);
  Py_XDECREF(value);
  Py_XDECREF(tb);
  return -1;
}

PyObject* rt_refresh(PyObject*, PyObject*) {
  kg_rt_refresh();
  Py_RETURN_NONE;
}

}  // namespace internal

using namespace internal;

namespace {

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

PyObject* values_dict(const kg_device_values* d) {
  return Py_BuildValue("{sLsLsLsLsLsLsLsLsi}", "sm_count", (long long)d->sm_count, "max_shared_mem_optin",
                       (long long)d->max_shared_mem_optin, "max_shared_mem_per_sm", (long long)d->max_shared_mem_per_sm,
                       "max_threads_per_sm", (long long)d->max_threads_per_sm, "max_threads_per_block",
                       (long long)d->max_threads_per_block, "max_blocks_per_sm", (long long)d->max_blocks_per_sm,
                       "reserved_shared_mem_per_block", (long long)d->reserved_shared_mem_per_block,
                       "max_cluster_size", (long long)d->max_cluster_size, "device", (int)d->device);
}

PyObject* rt_device_values(PyObject*, PyObject*) { return values_dict(kg_rt_device_values()); }

PyObject* rt_target_table(PyObject*, PyObject*) { return values_dict(kg_rt_target_table()); }

PyObject* rt_use_target_table(PyObject*, PyObject* arg) {
  const int on = PyObject_IsTrue(arg);
  if (on < 0) return nullptr;
  kg_rt_use_target_table(on);
  Py_RETURN_NONE;
}

PyObject* rt_limit_sms(PyObject*, PyObject* arg) {
  const long n = PyLong_AsLong(arg);
  if (n == -1 && PyErr_Occurred()) return nullptr;
  if (n < 0 || n > INT32_MAX) {
    PyErr_Format(PyExc_ValueError, "limit_sms(%ld): give a number of SMs (0: no limit)", n);
    return nullptr;
  }
  kg_rt_limit_sms(static_cast<int32_t>(n));
  Py_RETURN_NONE;
}

PyMethodDef runtime_methods[] = {
    {"device_values", rt_device_values, METH_NOARGS,
     "The device values plans use now (device.sm_count, ...): the current device's when it is the target's, "
     "else the target's table; 'device' is -1 for the table."},
    {"target_table", rt_target_table, METH_NOARGS, "The target's device table (specs/targets.yaml)."},
    {"use_target_table", rt_use_target_table, METH_O,
     "use_target_table(on): plans use the target's table even on a GPU (process-wide)."},
    {"limit_sms", rt_limit_sms, METH_O,
     "limit_sms(n): plans see at most n SMs (0: no limit; process-wide)."},
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

int add_runtime_functions(PyObject* module) { return PyModule_AddFunctions(module, runtime_methods); }

}  // namespace kg::py
