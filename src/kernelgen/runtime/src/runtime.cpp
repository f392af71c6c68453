// kernelgen launcher runtime: the parts of kernelgen/runtime.h that are not inline, and
// the C functions of kernelgen/abi.h. Compiled once into each target's shared library, with
// hidden visibility: the C functions are the library's exports, the kg:: classes serve its
// modules alone.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <vector>

#include "kernelgen/runtime.h"
#include "kernelgen/target_table.h"

#ifndef KERNELGEN_TARGET_NAME
#error "KERNELGEN_TARGET_NAME must be defined by the build"
#endif
#ifndef KERNELGEN_TARGET_CC
#error "KERNELGEN_TARGET_CC (major * 10 + minor) must be defined by the build"
#endif

namespace kg {
namespace {

std::mutex& registry_mutex() {
  static std::mutex m;
  return m;
}
std::vector<KillSwitch*>& registry() {
  static std::vector<KillSwitch*> v;
  return v;
}

constexpr int kMaxDevices = 64;
std::atomic<const DeviceInfo*> g_devices[kMaxDevices];
std::mutex g_device_mutex;
std::mutex g_occupancy_mutex;
std::atomic<int> g_use_table{0};
std::atomic<int> g_sm_limit{0};  // kg_rt_limit_sms: the most SMs plans see (0: no limit)
// The values with sm_count limited, per device (the table: slot kMaxDevices), made once per
// (values, limit) and never freed: a plan may still read an older one.
struct Limited {
  const kg_device_values* from;
  int limit;
  kg_device_values values;
};
std::atomic<const Limited*> g_limited[kMaxDevices + 1];
std::mutex g_limited_mutex;

const kg_device_values kTable = {
    KG_TABLE_SM_COUNT, KG_TABLE_MAX_SHARED_MEM_OPTIN, KG_TABLE_MAX_SHARED_MEM_PER_SM,
    KG_TABLE_MAX_THREADS_PER_SM, KG_TABLE_MAX_THREADS_PER_BLOCK, KG_TABLE_MAX_BLOCKS_PER_SM,
    KG_TABLE_RESERVED_SHARED_MEM_PER_BLOCK, KG_TABLE_MAX_CLUSTER_SIZE, -1, 0};

}  // namespace

bool pdl_disabled() {
  static KillSwitch no_pdl("KERNELGEN_NO_PDL");
  return no_pdl.killed();
}

KillSwitch::KillSwitch(const char* env) : env_(env) {
  std::lock_guard<std::mutex> lock(registry_mutex());
  registry().push_back(this);
}

int KillSwitch::reload() {
  int s = std::getenv(env_) != nullptr ? 1 : 0;
  state_.store(s, std::memory_order_relaxed);
  return s;
}

const DeviceInfo* device_info(int device, cudaError_t* err) {
  if (device < 0 || device >= kMaxDevices) {
    *err = cudaErrorInvalidDevice;
    return nullptr;
  }
  const DeviceInfo* info = g_devices[device].load(std::memory_order_acquire);
  if (info != nullptr) return info;
  std::lock_guard<std::mutex> lock(g_device_mutex);
  info = g_devices[device].load(std::memory_order_acquire);
  if (info != nullptr) return info;
  int major = 0, minor = 0, optin = 0;
  cudaError_t e = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device);
  if (e == cudaSuccess) e = cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device);
  if (e == cudaSuccess) e = cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device);
  int sms = 0, smem_sm = 0, threads_sm = 0, threads_block = 0, blocks_sm = 0, reserved = 0;
  if (e == cudaSuccess) e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  if (e == cudaSuccess) e = cudaDeviceGetAttribute(&smem_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, device);
  if (e == cudaSuccess) e = cudaDeviceGetAttribute(&threads_sm, cudaDevAttrMaxThreadsPerMultiProcessor, device);
  if (e == cudaSuccess) e = cudaDeviceGetAttribute(&threads_block, cudaDevAttrMaxThreadsPerBlock, device);
  if (e == cudaSuccess) e = cudaDeviceGetAttribute(&blocks_sm, cudaDevAttrMaxBlocksPerMultiprocessor, device);
  if (e == cudaSuccess) e = cudaDeviceGetAttribute(&reserved, cudaDevAttrReservedSharedMemoryPerBlock, device);
  if (e != cudaSuccess) {
    *err = e;
    return nullptr;
  }
  // The portable cluster size: larger clusters need the non-portable attribute, which
  // generated launchers do not set.
  const kg_device_values values = {sms, optin, smem_sm, threads_sm, threads_block, blocks_sm, reserved,
                                   KG_TABLE_MAX_CLUSTER_SIZE < 8 ? KG_TABLE_MAX_CLUSTER_SIZE : 8, device, 0};
  auto* fresh = new DeviceInfo{major * 10 + minor == KERNELGEN_TARGET_CC, major * 10 + minor, optin, values};
  g_devices[device].store(fresh, std::memory_order_release);  // never freed: one per device
  return fresh;
}

int64_t KernelSlot::blocks_per_sm(const void* func, int dev, int64_t threads, int64_t shared_mem) {
  {
    std::lock_guard<std::mutex> lock(g_occupancy_mutex);
    for (const Occupancy& o : occupancy_)
      if (o.threads == threads && o.shared_mem == shared_mem && o.dev == dev && o.threads != 0) return o.blocks;
  }
  int n = 0;
  // The opt-in for large shared memory first: the occupancy query counts the kernel's limit.
  if (prepare(func, shared_mem) != KG_LAUNCHED ||
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, func, static_cast<int>(threads),
                                                    static_cast<size_t>(shared_mem)) != cudaSuccess) {
    cudaGetLastError();
    n = 0;
  }
  std::lock_guard<std::mutex> lock(g_occupancy_mutex);
  occupancy_[occupancy_next_] = Occupancy{dev, threads, shared_mem, n};
  occupancy_next_ = (occupancy_next_ + 1) % 8;
  return n;
}

int32_t KernelSlot::prepare_slow(const void* func, int64_t shared_mem, int dev, uint64_t bit) {
  cudaError_t err = cudaSuccess;
  const DeviceInfo* info = device_info(dev, &err);
  if (info == nullptr) return -KG_CODE(KG_E_CUDA, err);
  if (!info->compatible) return -KG_CODE(KG_E_DEVICE, info->cc);
  cudaFuncAttributes attrs{};
  err = cudaFuncGetAttributes(&attrs, func);
  if (err != cudaSuccess) return -KG_CODE(KG_E_CUDA, err);
  const int64_t static_smem = static_cast<int64_t>(attrs.sharedSizeBytes);
  static_smem_.store(static_smem, std::memory_order_relaxed);  // published by checked_ below
  const int64_t room = info->smem_optin - static_smem;  // the most dynamic memory can be
  if (shared_mem > room) return -KG_CODE(KG_E_SHARED_MEM, 0);
  if (shared_mem + static_smem > kDefaultSharedMemLimit) {
    if (bit != 0 && !(optin_set_.load(std::memory_order_acquire) & bit)) {
      // Raise the kernel's limit to the device maximum once, so no launch pays for it again.
      err = cudaFuncSetAttribute(func, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 static_cast<int>(room));
      if (err != cudaSuccess) return -KG_CODE(KG_E_CUDA, err);
      optin_limit_[dev] = room;
      optin_set_.fetch_or(bit, std::memory_order_acq_rel);
    } else if (bit == 0) {
      err = cudaFuncSetAttribute(func, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 static_cast<int>(shared_mem));
      if (err != cudaSuccess) return -KG_CODE(KG_E_CUDA, err);
    }
  }
  if (bit != 0) checked_.fetch_or(bit, std::memory_order_acq_rel);
  return KG_LAUNCHED;
}

}  // namespace kg

namespace {

const char* expr_error_name(int32_t detail) {
  switch (detail) {
    case KG_EXPR_OVERFLOW: return "integer overflow";
    case KG_EXPR_DIV_ZERO: return "division by zero";
    case KG_EXPR_SHIFT: return "shift count outside 0..62";
    default: return "invalid value";
  }
}

const char* clause(const char* const* list, int32_t n, int32_t i) {
  return (list != nullptr && i >= 0 && i < n) ? list[i] : "?";
}

}  // namespace

#pragma GCC visibility push(default)
extern "C" {

void kg_rt_describe(const kg_kernel_info* k, int32_t code, char* buf, size_t size) {
  if (size == 0) return;
  const char* name = k ? k->name : "kernel";
  const int32_t cat = KG_CATEGORY(code), detail = KG_DETAIL(code);
  static const char* const kAxes[] = {"x", "y", "z", "x*y*z"};
  if (code == KG_LAUNCHED) {
    std::snprintf(buf, size, "%s: launched", name);
  } else if (code > 0) {
    switch (cat) {
      case KG_NL_KILLED:
        std::snprintf(buf, size, "%s: not launched: kill switch %s is set", name,
                      k && k->kill_switch ? k->kill_switch : "?");
        break;
      case KG_NL_ABSENT:
        std::snprintf(buf, size, "%s: not launched: absent on target %s", name, k ? k->target : "?");
        break;
      case KG_NL_EMPTY:
        std::snprintf(buf, size, "%s: not launched: empty work (%s)", name,
                      k ? clause(k->skip_if, k->n_skip_if, detail) : "?");
        break;
      case KG_NL_CLAUSE:
        std::snprintf(buf, size, "%s: not launched: %s is false", name,
                      k ? clause(k->applies_if, k->n_applies_if, detail) : "?");
        break;
      case KG_NL_NO_VARIANT:
        std::snprintf(buf, size, "%s: not launched: no variant for this %s", name,
                      k && k->variant_on ? k->variant_on : "value");
        break;
      case KG_NL_NO_INSTANCE:
        std::snprintf(buf, size, "%s: not launched: no instantiation for this dtype (%s)", name,
                      k && k->variant_on ? k->variant_on : "?");
        break;
      case KG_NL_EMPTY_GRID:
        std::snprintf(buf, size, "%s: not launched: grid %s is 0", name, kAxes[detail & 3]);
        break;
      case KG_NL_UNALIGNED:
        std::snprintf(buf, size,
                      "%s: not launched: the array of tensor map %d is not 16-byte aligned, or its row stride is not "
                      "a multiple of 16 bytes",
                      name, detail);
        break;
      default:
        std::snprintf(buf, size, "%s: not launched (code %d)", name, code);
    }
  } else {
    switch (cat) {
      case KG_E_REQUIRES:
        std::snprintf(buf, size, "%s: invalid arguments: requires %s", name,
                      k ? clause(k->requires_, k->n_requires, detail) : "?");
        break;
      case KG_E_EXPR:
        std::snprintf(buf, size, "%s: invalid arguments: %s while computing the launch", name,
                      expr_error_name(detail));
        break;
      case KG_E_GRID:
        if (detail & KG_DETAIL_NEGATIVE)
          std::snprintf(buf, size, "%s: grid %s is negative", name, kAxes[detail & 3]);
        else
          std::snprintf(buf, size, "%s: grid %s exceeds the CUDA limit (%lld)", name, kAxes[detail & 3],
                        (detail & 3) == 0   ? KG_GRID_LIMIT_X
                        : (detail & 3) == 1 ? KG_GRID_LIMIT_Y
                                            : KG_GRID_LIMIT_Z);
        break;
      case KG_E_BLOCK:
        if (detail & KG_DETAIL_NEGATIVE)
          std::snprintf(buf, size, "%s: block %s is negative", name, kAxes[detail & 3]);
        else if (detail & KG_DETAIL_ZERO)
          std::snprintf(buf, size, "%s: block %s is 0", name, kAxes[detail & 3]);
        else
          std::snprintf(buf, size, "%s: block %s is outside the target's limits", name, kAxes[detail & 3]);
        break;
      case KG_E_SHARED_MEM:
        if (detail & KG_DETAIL_NEGATIVE)
          std::snprintf(buf, size, "%s: dynamic shared memory is negative", name);
        else
          std::snprintf(buf, size, "%s: dynamic shared memory exceeds the device's opt-in limit", name);
        break;
      case KG_E_DEVICE:
        if (k != nullptr && k->target != nullptr && std::strcmp(k->target, KERNELGEN_TARGET_NAME) != 0) {
          // Another library's kernel (a program's own call may reach any one library's runtime):
          // its target, whose compute capability this library does not know.
          std::snprintf(buf, size, "%s: built for target %s but the current device has compute capability %d.%d",
                        name, k->target, detail / 10, detail % 10);
          break;
        }
        std::snprintf(buf, size,
                      "%s: built for target %s (compute capability %d.%d) but the current device has "
                      "compute capability %d.%d",
                      name, kg_rt_target(), KERNELGEN_TARGET_CC / 10, KERNELGEN_TARGET_CC % 10, detail / 10,
                      detail % 10);
        break;
      case KG_E_LAUNCH_BOUNDS:
        std::snprintf(buf, size, "%s: the block has more threads than the kernel's __launch_bounds__", name);
        break;
      case KG_E_CLUSTER:
        if (detail == 3)
          std::snprintf(buf, size, "%s: the cluster has more blocks than the device allows (or a dimension < 1)", name);
        else
          std::snprintf(buf, size, "%s: grid %s is not a whole number of clusters", name, kAxes[detail & 3]);
        break;
      case KG_E_CORESIDENT:
        std::snprintf(buf, size,
                      "%s: the cooperative grid has more blocks than can be co-resident "
                      "(device.sm_count * kernel.blocks_per_sm)",
                      name);
        break;
      case KG_E_DEVICE_SCALAR:
        if (k != nullptr && k->args != nullptr && detail < k->n_args) {
          std::snprintf(buf, size,
                        "%s: argument '%s': a device scalar must point to one element in device memory (null, "
                        "host or unregistered memory given)",
                        name, k->args[detail]);
          break;
        }
        std::snprintf(buf, size,
                      "%s: argument %d is a device scalar: it must point to one element in device memory (null, "
                      "host or unregistered memory given)",
                      name, detail + 1);
        break;
      case KG_E_TENSOR_MAP:
        std::snprintf(buf, size,
                      "%s: the driver refused to encode a tensor map (CUresult %d; 0: no cuTensorMapEncodeTiled in "
                      "this driver)",
                      name, detail);
        break;
      case KG_E_CUDA:
        if (detail == cudaErrorInsufficientDriver || detail == cudaErrorStubLibrary) {
          std::snprintf(buf, size,
                        "%s: no usable NVIDIA driver on this machine: no driver is installed, or it is older than "
                        "the CUDA %d.%d runtime this library was built with; install or update the NVIDIA driver "
                        "(CUDA error %d, %s)",
                        name, CUDART_VERSION / 1000, CUDART_VERSION % 1000 / 10, detail,
                        cudaGetErrorName(static_cast<cudaError_t>(detail)));
          break;
        }
        if (detail == cudaErrorNoDevice) {
          std::snprintf(buf, size,
                        "%s: no CUDA GPU is visible to this process (none is installed, or CUDA_VISIBLE_DEVICES "
                        "hides them) (CUDA error %d, %s)",
                        name, detail, cudaGetErrorName(static_cast<cudaError_t>(detail)));
          break;
        }
        std::snprintf(buf, size, "%s: CUDA error %d (%s): %s", name, detail,
                      cudaGetErrorName(static_cast<cudaError_t>(detail)),
                      cudaGetErrorString(static_cast<cudaError_t>(detail)));
        break;
      default:
        std::snprintf(buf, size, "%s: error (code %d)", name, code);
    }
  }
}

void kg_rt_refresh(void) {
  std::lock_guard<std::mutex> lock(kg::registry_mutex());
  for (kg::KillSwitch* s : kg::registry()) s->reset();
}

const char* kg_rt_target(void) { return KERNELGEN_TARGET_NAME; }

const kg_device_values* kg_rt_target_table(void) { return &kg::kTable; }

void kg_rt_use_target_table(int32_t on) { kg::g_use_table.store(on != 0 ? 1 : 0, std::memory_order_relaxed); }

void kg_rt_limit_sms(int32_t sms) { kg::g_sm_limit.store(sms > 0 ? sms : 0, std::memory_order_relaxed); }

namespace kg {
namespace {

// `v` with sm_count at most the limit, when one is set and smaller.
const kg_device_values* limited(const kg_device_values* v) {
  const int limit = g_sm_limit.load(std::memory_order_relaxed);
  if (limit <= 0 || limit >= v->sm_count) return v;
  const int slot = v->device >= 0 && v->device < kMaxDevices ? v->device : kMaxDevices;
  const Limited* l = g_limited[slot].load(std::memory_order_acquire);
  if (l != nullptr && l->from == v && l->limit == limit) return &l->values;
  std::lock_guard<std::mutex> lock(g_limited_mutex);
  l = g_limited[slot].load(std::memory_order_acquire);
  if (l != nullptr && l->from == v && l->limit == limit) return &l->values;
  kg_device_values values = *v;
  values.sm_count = limit;
  auto* fresh = new Limited{v, limit, values};  // never freed (see g_limited)
  g_limited[slot].store(fresh, std::memory_order_release);
  return &fresh->values;
}

const kg_device_values* unlimited_values() {
  if (g_use_table.load(std::memory_order_relaxed)) return &kTable;
  int dev = -1;
  if (cudaGetDevice(&dev) != cudaSuccess) {
    cudaGetLastError();  // no GPU or no driver: plans use the table
    return &kTable;
  }
  cudaError_t err = cudaSuccess;
  const DeviceInfo* info = device_info(dev, &err);
  if (info == nullptr) {
    cudaGetLastError();
    return &kTable;
  }
  return info->compatible ? &info->values : &kTable;
}

}  // namespace
}  // namespace kg

const kg_device_values* kg_rt_device_values(void) { return kg::limited(kg::unlimited_values()); }
int32_t kg_rt_target_cc(void) { return KERNELGEN_TARGET_CC; }

int32_t kg_rt_device_count(void) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear "no device" so it does not look like a launch failure later
    return 0;
  }
  return n;
}

int32_t kg_rt_current_device(void) {
  int d = -1;
  if (cudaGetDevice(&d) != cudaSuccess) {
    cudaGetLastError();
    return -1;
  }
  return d;
}

int32_t kg_rt_device_cc(int32_t device) {
  cudaError_t err = cudaSuccess;
  const kg::DeviceInfo* info = kg::device_info(device, &err);
  if (info == nullptr) {
    cudaGetLastError();
    return -1;
  }
  return info->cc;
}

int32_t kg_rt_is_sticky_error(int32_t e) {
  switch (static_cast<cudaError_t>(e)) {
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
    case cudaErrorHardwareStackError:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorAssert:
    case cudaErrorLaunchTimeout:
    case cudaErrorECCUncorrectable:
    case cudaErrorContextIsDestroyed:
      return 1;
    default:
      return 0;
  }
}

// The same functions under the package's own names, <c_prefix>_rt_* (KERNELGEN_C_PREFIX, set by the
// target's CMake list where the C prefix is not kg; the module headers declare them): every library
// exports the kg_rt_* names, so a program's call of one reaches the first library on its link line,
// whereas <c_prefix>_rt_refresh reaches this one. The calls inside bind to this library's own
// functions (-Bsymbolic-functions).
#ifdef KERNELGEN_C_PREFIX
#define KG_RT_JOIN2(prefix, name) prefix##_rt_##name
#define KG_RT_JOIN(prefix, name) KG_RT_JOIN2(prefix, name)
#define KG_RT_OWN(name) KG_RT_JOIN(KERNELGEN_C_PREFIX, name)
void KG_RT_OWN(describe)(const kg_kernel_info* kernel, int32_t code, char* buf, size_t size) {
  kg_rt_describe(kernel, code, buf, size);
}
void KG_RT_OWN(refresh)(void) { kg_rt_refresh(); }
const char* KG_RT_OWN(target)(void) { return kg_rt_target(); }
int32_t KG_RT_OWN(target_cc)(void) { return kg_rt_target_cc(); }
const kg_device_values* KG_RT_OWN(device_values)(void) { return kg_rt_device_values(); }
const kg_device_values* KG_RT_OWN(target_table)(void) { return kg_rt_target_table(); }
void KG_RT_OWN(use_target_table)(int32_t on) { kg_rt_use_target_table(on); }
void KG_RT_OWN(limit_sms)(int32_t n) { kg_rt_limit_sms(n); }
int32_t KG_RT_OWN(device_count)(void) { return kg_rt_device_count(); }
int32_t KG_RT_OWN(current_device)(void) { return kg_rt_current_device(); }
int32_t KG_RT_OWN(device_cc)(int32_t device) { return kg_rt_device_cc(device); }
int32_t KG_RT_OWN(is_sticky_error)(int32_t cuda_error) { return kg_rt_is_sticky_error(cuda_error); }
#endif

}  // extern "C"
#pragma GCC visibility pop
