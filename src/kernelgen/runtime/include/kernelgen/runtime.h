// kernelgen launcher runtime: what every generated launcher shares.
//
// - checked 64-bit expression helpers (kg::x_*), with the same semantics as the Python
//   evaluation in kernelgen.pyexpr: floor division, errors on overflow, division by zero
//   and shift counts outside 0..62;
// - kill switches read from the environment once, re-read after kg_rt_refresh();
// - per-kernel, per-device preparation done once: the device must be the target's, and a
//   kernel above 48 KiB of dynamic shared memory gets its opt-in attribute set;
// - the C++ Outcome and Plan types.
// Launchers built on this never synchronise and never allocate, so they can be captured
// into CUDA graphs. C++17 or later.
#pragma once

#if !defined(__cplusplus) || (__cplusplus < 201703L && (!defined(_MSVC_LANG) || _MSVC_LANG < 201703L))
#error "kernelgen's C++ headers need C++17 or later (-std=c++17); C programs include the <module>_c.h headers"
#else  // the rest only where it compiles: the error above is the only one

#include <cuda_runtime.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <string>
#include <tuple>
#include <type_traits>

#include "kernelgen/abi.h"

namespace kernelgen {

// What a launcher did. `launched()` is the common case; otherwise `reason()` explains.
struct Outcome {
  int32_t code = KG_LAUNCHED;
  const kg_kernel_info* kernel = nullptr;  // the kernel the code is about (for chains: the one that ran)

  bool launched() const { return code == KG_LAUNCHED; }
  bool error() const { return code < 0; }
  explicit operator bool() const { return launched(); }
  std::string reason() const {
    char buf[512];
    kg_rt_describe(kernel, code, buf, sizeof buf);
    return buf;
  }
};

using Plan = kg_plan;

// What a launcher's sizes_<name> gives: the element counts of its array arguments that have a size,
// in the order its declaration's comment lists them (the C ABI's <c_prefix>_<module>__<name>__sizes
// writes the same), and its code: KG_LAUNCHED, or the error computing them (the values are then not
// to be used).
template <std::size_t N>
struct Sizes {
  int32_t code = KG_LAUNCHED;
  std::array<int64_t, N> values{};
};

}  // namespace kernelgen

namespace kg {

// Reads its arguments and does nothing: a generated function takes every integer argument of its
// launcher (a plan, a launch's sizes) and may read only some, which -Wunused-parameter reports.
template <typename... Ts>
constexpr void unused(const Ts&...) noexcept {}

// The launchers' check of a kernel's parameters against the spec's types. Integers of one size and
// signedness are one type here, whatever their spelling (long long and long, unsigned long long and
// uint64_t, int and int32_t), an enum counts as its underlying integer type, and pointers to such
// types with the same const and volatile are one type too; every other parameter must be the spec's
// type exactly, except that the spec's void* takes any object pointer (below).
template <typename T, bool = std::is_enum_v<T>>
struct integer_of {
  using type = T;
};
template <typename T>
struct integer_of<T, true> {
  using type = std::underlying_type_t<T>;
};

template <typename A, typename B, bool = std::is_integral_v<A> && std::is_integral_v<B>>
struct same_integer_type : std::false_type {};
template <typename A, typename B>
struct same_integer_type<A, B, true>
    : std::bool_constant<!std::is_same_v<A, bool> && !std::is_same_v<B, bool> && sizeof(A) == sizeof(B) &&
                         std::is_signed_v<A> == std::is_signed_v<B>> {};
template <typename A, typename B>
using same_integer = same_integer_type<typename integer_of<A>::type, typename integer_of<B>::type>;

template <typename A, typename B>
struct same_param {
  static constexpr bool value = std::is_same_v<A, B> || same_integer<A, B>::value;
};
// A: the kernel's pointee, B: the spec's. The spec's void* (untyped memory, counted in bytes) takes
// a pointer to any object type the kernel names (a struct of its own, float3), with the same const.
template <typename A, typename B>
struct same_param<A*, B*> {
  static constexpr bool value = std::is_const_v<A> == std::is_const_v<B> &&
                                std::is_volatile_v<A> == std::is_volatile_v<B> &&
                                (same_param<std::remove_cv_t<A>, std::remove_cv_t<B>>::value ||
                                 (std::is_void_v<std::remove_cv_t<B>> && std::is_object_v<A>));
};

template <typename F>
struct params;
template <typename... P>
struct params<void (*)(P...)> {
  static constexpr std::size_t count = sizeof...(P);
  using tuple = std::tuple<P...>;
};
template <typename... P>
struct params<void (*)(P...) noexcept> : params<void (*)(P...)> {};

// The kernel's I-th parameter type (F: the kernel's function pointer type).
template <typename F, std::size_t I>
using param_t = typename std::tuple_element<I, typename params<F>::tuple>::type;

// Kernel F and the spec's function type G take as many parameters.
template <typename F, typename G>
constexpr bool same_arity_v = params<F>::count == params<G>::count;

// The kernel a spec's symbol names, as a function pointer: kg::pick<Sig>(&symbol, 0), Sig the spec's
// signature. Where the symbol names one function, that function (its parameters may spell the spec's
// types otherwise; the checks below compare them); where it names overloads, the one whose parameters
// are exactly the spec's (the second form cannot deduce F from an overload set, and 0 prefers the first).
template <typename Sig>
constexpr Sig pick(Sig f, int) noexcept {
  return f;
}
template <typename Sig, typename F>
constexpr F pick(F f, long) noexcept {
  return f;
}

// Parameter I of F is the spec's: true when the counts differ (same_arity_v reports that).
template <typename F, typename G, std::size_t I>
constexpr bool param_matches() {
  if constexpr (params<F>::count != params<G>::count) {
    return true;
  } else {
    return same_param<param_t<F, I>, param_t<G, I>>::value;
  }
}

// An integer argument, or a pointer to integers, as parameter I of kernel F, which may spell the
// integer type otherwise (long long for int64_t) or take an enum of it: a static_cast of the value,
// a reinterpret_cast of the pointer (no-ops where the types agree).
template <typename F, std::size_t I, typename A>
inline param_t<F, I> arg(A a) {
  if constexpr (std::is_pointer_v<A>) {
    return reinterpret_cast<param_t<F, I>>(a);
  } else {
    return static_cast<param_t<F, I>>(a);
  }
}

// A 16-bit float scalar (__half, __nv_bfloat16) from the bit pattern the C ABI passes.
template <typename T>
inline T from_bits(uint16_t bits) {
  static_assert(sizeof(T) == sizeof(uint16_t), "a 16-bit type");
  T v;
  std::memcpy(static_cast<void*>(&v), &bits, sizeof bits);
  return v;
}

constexpr int64_t kDefaultSharedMemLimit = 48 * 1024;

// The highest error code seen (1 overflow, 2 division by zero, 3 shift count), so the
// result does not depend on the order operands are evaluated in; see kernelgen.pyexpr.
struct ExprStatus {
  int32_t code = 0;
  void fail(int32_t c) {
    if (c > code) code = c;
  }
};

inline int64_t x_neg(int64_t a, ExprStatus& e) {
  if (a == INT64_MIN) {
    e.fail(KG_EXPR_OVERFLOW);
    return 0;
  }
  return -a;
}
inline int64_t x_add(int64_t a, int64_t b, ExprStatus& e) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) {
    e.fail(KG_EXPR_OVERFLOW);
    return 0;
  }
  return r;
}
inline int64_t x_sub(int64_t a, int64_t b, ExprStatus& e) {
  int64_t r;
  if (__builtin_sub_overflow(a, b, &r)) {
    e.fail(KG_EXPR_OVERFLOW);
    return 0;
  }
  return r;
}
inline int64_t x_mul(int64_t a, int64_t b, ExprStatus& e) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) {
    e.fail(KG_EXPR_OVERFLOW);
    return 0;
  }
  return r;
}
inline int64_t x_floordiv(int64_t a, int64_t b, ExprStatus& e) {
  if (b == 0) {
    e.fail(KG_EXPR_DIV_ZERO);
    return 0;
  }
  if (a == INT64_MIN && b == -1) {
    e.fail(KG_EXPR_OVERFLOW);
    return 0;
  }
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) q -= 1;
  return q;
}
inline int64_t x_mod(int64_t a, int64_t b, ExprStatus& e) {
  if (b == 0) {
    e.fail(KG_EXPR_DIV_ZERO);
    return 0;
  }
  if (b == -1) return 0;
  int64_t r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}
inline int64_t x_div_ceil(int64_t a, int64_t b, ExprStatus& e) {
  if (b == 0) {
    e.fail(KG_EXPR_DIV_ZERO);
    return 0;
  }
  if (a == INT64_MIN && b == -1) {
    e.fail(KG_EXPR_OVERFLOW);
    return 0;
  }
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) == (b < 0))) q += 1;
  return q;
}
inline int64_t x_shl(int64_t a, int64_t n, ExprStatus& e) {
  if (n < 0 || n > 62) {
    e.fail(KG_EXPR_SHIFT);
    return 0;
  }
  if (a > (INT64_MAX >> n) || a < (INT64_MIN >> n)) {
    e.fail(KG_EXPR_OVERFLOW);
    return 0;
  }
  return a * (static_cast<int64_t>(1) << n);
}
inline int64_t x_shr(int64_t a, int64_t n, ExprStatus& e) {
  if (n < 0 || n > 62) {
    e.fail(KG_EXPR_SHIFT);
    return 0;
  }
  return a >> n;  // arithmetic shift: floor, as in Python
}
inline int64_t x_bit_and(int64_t a, int64_t b, ExprStatus&) { return a & b; }
inline int64_t x_bit_or(int64_t a, int64_t b, ExprStatus&) { return a | b; }
inline int64_t x_min(int64_t a, int64_t b) { return a < b ? a : b; }
inline int64_t x_max(int64_t a, int64_t b) { return a > b ? a : b; }

// A module's kill switch: the environment variable is read on first use and cached;
// kg_rt_refresh() makes the next use read it again.
class KillSwitch {
 public:
  explicit KillSwitch(const char* env);
  bool killed() {
    int s = state_.load(std::memory_order_relaxed);
    if (s < 0) s = reload();
    return s != 0;
  }
  void reset() { state_.store(-1, std::memory_order_relaxed); }

 private:
  int reload();
  const char* env_;
  std::atomic<int> state_{-1};
};

// KERNELGEN_NO_PDL (any value): launchers of kernels whose spec sets
// `launch: {programmatic_dependent: true}` launch them without that attribute, so each waits for
// the kernel before it to end as a plain launch does (to rule overlap out when hunting a race, or
// to measure what it gains). Read on first use; kg_rt_refresh() makes the next launch read it again.
bool pdl_disabled();

// Device facts a launcher checks, queried once per device.
struct DeviceInfo {
  int32_t compatible;     // the device's compute capability is the target's
  int32_t cc;             // major * 10 + minor
  int64_t smem_optin;     // cudaDevAttrMaxSharedMemoryPerBlockOptin
  kg_device_values values;  // what plans read for device names on this device
};
// Returns nullptr (and sets *err) when the device cannot be queried.
const DeviceInfo* device_info(int device, cudaError_t* err);

// Per-kernel launch preparation, done once per device: checks the device is the
// target's and raises the dynamic shared memory limit of kernels whose static plus dynamic
// shared memory exceeds the default 48 KiB. The per-block limits (the default and the
// device's opt-in maximum) cover static and dynamic shared memory together, so the kernel's
// static size, queried once, is counted against both. Returns KG_LAUNCHED (0) or a negative
// error code.
class KernelSlot {
 public:
  // kernel.blocks_per_sm on device `dev` (cudaOccupancyMaxActiveBlocksPerMultiprocessor at this
  // block and shared memory), cached per device for the last few geometries; 0 when the kernel
  // cannot launch so. Allocates nothing (a fixed table), no synchronisation.
  int64_t blocks_per_sm(const void* func, int dev, int64_t threads, int64_t shared_mem);

  int32_t prepare(const void* func, int64_t shared_mem) {
    int dev = 0;
    cudaError_t err = cudaGetDevice(&dev);
    if (err != cudaSuccess) return -KG_CODE(KG_E_CUDA, err);
    const uint64_t bit = (dev >= 0 && dev < 64) ? (static_cast<uint64_t>(1) << dev) : 0;
    if (bit != 0 && (checked_.load(std::memory_order_acquire) & bit)) {
      // Fast path: this device was checked and, if needed, the opt-in was set.
      if (shared_mem + static_smem_.load(std::memory_order_relaxed) <= kDefaultSharedMemLimit) {
        return KG_LAUNCHED;
      }
      if (optin_set_.load(std::memory_order_acquire) & bit) {
        return shared_mem <= optin_limit_[dev] ? KG_LAUNCHED : -KG_CODE(KG_E_SHARED_MEM, 0);
      }
    }
    return prepare_slow(func, shared_mem, dev, bit);
  }

 private:
  int32_t prepare_slow(const void* func, int64_t shared_mem, int dev, uint64_t bit);
  std::atomic<uint64_t> checked_{0};
  std::atomic<int64_t> static_smem_{0};  // the kernel's static shared memory, stored before any checked_ bit
  std::atomic<uint64_t> optin_set_{0};
  int64_t optin_limit_[64] = {};
  struct Occupancy {
    int32_t dev;
    int64_t threads, shared_mem, blocks;
  };
  Occupancy occupancy_[8] = {};
  int32_t occupancy_next_ = 0;
};

// kernel.blocks_per_sm from a table (kg_rt_target_table()): a bound from the per-SM limits,
// threads counted in whole warps and shared memory with the reserved amount per block;
// registers and static shared memory are not counted. 0 when the block or the shared memory
// does not fit. The same as kernelgen.plan.table_blocks_per_sm.
inline int64_t table_blocks_per_sm(const kg_device_values& d, int64_t bx, int64_t by, int64_t bz,
                                   int64_t shared_mem) {
  if (bx < 1 || by < 1 || bz < 1) return 0;
  // (called before the block's checks: each extent within the per-block thread limit first, so
  // that the product cannot overflow)
  const int64_t most = d.max_threads_per_block;
  if (bx > most || by > most || bz > most) return 0;
  const int64_t threads = bx * by * bz;
  if (threads > most || shared_mem < 0 || shared_mem > d.max_shared_mem_optin) return 0;
  const int64_t warps = (threads + 31) / 32;
  int64_t n = d.max_threads_per_sm / (warps * 32);
  if (d.max_blocks_per_sm < n) n = d.max_blocks_per_sm;
  const int64_t per_block = shared_mem + d.reserved_shared_mem_per_block;  // 0: no shared memory, none reserved
  if (per_block == 0) return n;
  const int64_t by_smem = d.max_shared_mem_per_sm / per_block;
  return by_smem < n ? by_smem : n;
}

// The checks after the geometry, in the order of kernelgen.plan.launch_code: the block against
// __launch_bounds__ (max_threads, 0: none), the grid against the cluster (nullptr: none), and a
// cooperative grid against device.sm_count * kernel.blocks_per_sm.
inline int32_t check_launch(const kg_plan& p, int64_t max_threads, const int64_t* cluster,
                            int64_t max_cluster_size, bool cooperative, int64_t sm_count,
                            int64_t blocks_per_sm) {
  if (max_threads > 0 && p.block[0] * p.block[1] * p.block[2] > max_threads) return -KG_CODE(KG_E_LAUNCH_BOUNDS, 0);
  if (cluster != nullptr) {
    if (cluster[0] < 1 || cluster[1] < 1 || cluster[2] < 1 || cluster[0] > max_cluster_size ||
        cluster[1] > max_cluster_size || cluster[2] > max_cluster_size ||
        cluster[0] * cluster[1] * cluster[2] > max_cluster_size)
      return -KG_CODE(KG_E_CLUSTER, 3);
    for (int a = 0; a < 3; ++a)
      if (p.grid[a] % cluster[a] != 0) return -KG_CODE(KG_E_CLUSTER, a);
  }
  if (cooperative && p.grid[0] * p.grid[1] * p.grid[2] > sm_count * blocks_per_sm) return -KG_CODE(KG_E_CORESIDENT, 0);
  return KG_LAUNCHED;
}

// The block and shared memory checks of check_geometry (the last of them, in its order).
inline int32_t check_block(const kg_plan& p, int64_t max_bx, int64_t max_by, int64_t max_bz, int64_t max_threads,
                           int64_t max_smem) {
  const int64_t block_limit[3] = {max_bx, max_by, max_bz};
  for (int a = 0; a < 3; ++a) {
    if (p.block[a] < 0) return -KG_CODE(KG_E_BLOCK, a | KG_DETAIL_NEGATIVE);
    if (p.block[a] == 0) return -KG_CODE(KG_E_BLOCK, a | KG_DETAIL_ZERO);
    if (p.block[a] > block_limit[a]) return -KG_CODE(KG_E_BLOCK, a);
  }
  if (p.block[0] * p.block[1] * p.block[2] > max_threads) return -KG_CODE(KG_E_BLOCK, 3);
  if (p.shared_mem < 0) return -KG_CODE(KG_E_SHARED_MEM, KG_DETAIL_NEGATIVE);
  if (p.shared_mem > max_smem) return -KG_CODE(KG_E_SHARED_MEM, 0);
  return KG_LAUNCHED;
}

// Checks computed geometry: a negative or over-limit grid dimension is an error, a zero
// one is empty work; block and shared memory must fit the target (a value below the range has
// the detail flag KG_DETAIL_NEGATIVE or KG_DETAIL_ZERO). The same checks, in the same order, as
// kernelgen.plan.geometry_code.
inline int32_t check_geometry(const kg_plan& p, int64_t max_bx, int64_t max_by, int64_t max_bz,
                              int64_t max_threads, int64_t max_smem) {
  static constexpr int64_t kGridLimit[3] = {KG_GRID_LIMIT_X, KG_GRID_LIMIT_Y, KG_GRID_LIMIT_Z};
  for (int a = 0; a < 3; ++a)
    if (p.grid[a] < 0) return -KG_CODE(KG_E_GRID, a | KG_DETAIL_NEGATIVE);
  for (int a = 0; a < 3; ++a)
    if (p.grid[a] == 0) return KG_CODE(KG_NL_EMPTY_GRID, a);
  for (int a = 0; a < 3; ++a)
    if (p.grid[a] > kGridLimit[a]) return -KG_CODE(KG_E_GRID, a);
  return check_block(p, max_bx, max_by, max_bz, max_threads, max_smem);
}

// For a plan that reads kernel.blocks_per_sm: a grid dimension of 0 while kernel.blocks_per_sm is
// 0 (a grid sized by the co-residency limit, min(device.sm_count * kernel.blocks_per_sm, ...)) is
// reported as the block or shared memory error that made it 0, where there is one; every other
// outcome of check_geometry stands. The same as kernelgen.plan.expect.
inline int32_t check_geometry_occupancy(const kg_plan& p, int32_t code, int64_t blocks_per_sm, int64_t max_bx,
                                        int64_t max_by, int64_t max_bz, int64_t max_threads, int64_t max_smem) {
  if (code <= 0 || KG_CATEGORY(code) != KG_NL_EMPTY_GRID || blocks_per_sm != 0) return code;
  const int32_t block = check_block(p, max_bx, max_by, max_bz, max_threads, max_smem);
  return block != KG_LAUNCHED ? block : code;
}

inline dim3 dims(const int64_t (&d)[3]) {
  return dim3(static_cast<unsigned>(d[0]), static_cast<unsigned>(d[1]), static_cast<unsigned>(d[2]));
}

inline int32_t launch_error(cudaError_t err) {
  return err == cudaSuccess ? KG_LAUNCHED : -KG_CODE(KG_E_CUDA, err);
}

// A struct argument from the C ABI's layout-identical C struct (the generated launcher file
// checks the layouts agree) to the kernel's C++ type: its bytes, as a launch copies them (T may
// declare copy operations, as CUDA's __half2 does, as long as its bytes are its value).
template <class T, class C>
inline T struct_from_c(const C& c) {
  static_assert(sizeof(T) == sizeof(C) && std::is_standard_layout_v<T> && std::is_trivially_destructible_v<T>,
                "kernelgen: struct layouts differ");
  T t;
  std::memcpy(static_cast<void*>(&t), &c, sizeof t);
  return t;
}

// A device scalar's pointer before a launch: non-null and in device (or managed) memory.
// KG_LAUNCHED, the DEVICE_SCALAR error with the argument's position, or the CUDA error of a query
// the runtime cannot answer (no usable driver, no device, a sticky error): that is the cause then.
inline int32_t check_device_scalar(const void* p, int32_t position) {
  if (p != nullptr) {
    cudaPointerAttributes attr{};
    const cudaError_t err = cudaPointerGetAttributes(&attr, p);
    if (err == cudaSuccess && (attr.type == cudaMemoryTypeDevice || attr.type == cudaMemoryTypeManaged)) {
      return KG_LAUNCHED;
    }
    if (err != cudaSuccess) {
      cudaGetLastError();  // this query's own error: not the next launch's
      if (err != cudaErrorInvalidValue) return launch_error(err);
    }
  }
  return -KG_CODE(KG_E_DEVICE_SCALAR, position);
}

// The outcome of cudaLaunchKernelEx: CUDA's refusal of a cooperative grid that cannot be
// co-resident is the plan's CORESIDENT error (a plan on the target's table may not know).
inline int32_t launch_error_ex(cudaError_t err) {
  if (err == cudaErrorCooperativeLaunchTooLarge) {
    cudaGetLastError();  // not sticky: clear it
    return -KG_CODE(KG_E_CORESIDENT, 0);
  }
  return launch_error(err);
}

}  // namespace kg
#endif  // C++17
