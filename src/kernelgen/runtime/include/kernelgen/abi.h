/* kernelgen C ABI: outcome codes, plans and kernel descriptions shared by every generated
 * launcher, the C headers, the C++ API and the Python bindings. Plain C, so any language
 * with a C FFI can call the generated `kg_<module>__<kernel>` functions.
 *
 * A launcher returns an int32 code:
 *   0                      launched;
 *   > 0                    not launched: (category << 16) | detail, category KG_NL_*;
 *   < 0                    error: -((category << 16) | detail), category KG_E_*.
 *
 * C99 or later (<stdint.h>, long long constants), or C++.
 */
#ifndef KERNELGEN_ABI_H
#define KERNELGEN_ABI_H

#if !defined(__cplusplus) && (!defined(__STDC_VERSION__) || __STDC_VERSION__ < 199901L)
#error "kernelgen's C headers need C99 or later (<stdint.h>, long long constants): compile with -std=c99 or newer"
#endif

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* KG_LAUNCHED, the KG_NL_* and KG_E_* categories and KG_EXPR_* details: generated from the
 * plan semantics (kernelgen/plan.py) into generated/<target>/include. */
#include "kernelgen/plan_codes.h"

#ifdef __cplusplus
}
/* C++: the same value through a constexpr function, so that code expanding KG_CODE has no C-style
 * cast (-Wold-style-cast) and no cast to the type an argument already has (-Wuseless-cast). */
namespace kg_abi {
constexpr int32_t code(long long category, long long detail) noexcept {
  return static_cast<int32_t>((category << 16) | detail);
}
}  /* namespace kg_abi */
#define KG_CODE(category, detail) (::kg_abi::code((category), (detail)))
extern "C" {
#else
#define KG_CODE(category, detail) (((int32_t)(category) << 16) | (int32_t)(detail))
#endif
#define KG_CATEGORY(code) (((code) < 0 ? -(code) : (code)) >> 16)
#define KG_DETAIL(code) (((code) < 0 ? -(code) : (code)) & 0xffff)

/* The dtype mask of one element type (KG_ELEM_* in the module headers that need them), for
 * launchers that pick an instantiation or chain member by element type. */
#define KG_DTYPE(elem) (1u << (elem))

/* Launch geometry and applicability for given arguments, computed without a GPU. */
typedef struct kg_plan {
  int64_t grid[3];
  int64_t block[3];
  int64_t shared_mem;
  int32_t code;    /* what launching would return, short of CUDA's own answer */
  int32_t variant; /* index of the chosen variant, -1 when the kernel has none */
  int64_t cluster[3]; /* the launch's cluster (the spec's cluster or launch.cluster), once the
                         geometry is planned; 0, 0, 0: none */
} kg_plan;

/* What plans read for the device names of expressions (device.sm_count, ...) and their launch
 * checks: the current device's values, or the target's table (specs/targets.yaml). */
typedef struct kg_device_values {
  int64_t sm_count;
  int64_t max_shared_mem_optin;          /* per block, opt-in */
  int64_t max_shared_mem_per_sm;
  int64_t max_threads_per_sm;
  int64_t max_threads_per_block;
  int64_t max_blocks_per_sm;
  int64_t reserved_shared_mem_per_block;
  int64_t max_cluster_size;
  int32_t device; /* the CUDA device the values come from; -1: the target's table */
  int32_t padding_;
} kg_device_values;

/* Static description of one kernel, used to explain outcome codes. */
typedef struct kg_kernel_info {
  const char* module;
  const char* name;
  const char* target;
  const char* kill_switch;          /* NULL when the module has none */
  const char* variant_on;           /* NULL when the kernel has no variants; for a launcher that
                                       picks by element type, its dtype keys ("T") */
  const char* const* skip_if;
  const char* const* applies_if;
  const char* const* requires_;
  int32_t n_skip_if;
  int32_t n_applies_if;
  int32_t n_requires;
  int32_t present;                  /* 0 when this target's build lacks the kernel */
  const char* const* args;          /* the launcher's argument names, in order (NULL for a dispatcher's
                                       or a chain's own description): errors name the argument whose
                                       position is their detail */
  int32_t n_args;
} kg_kernel_info;

/* Writes a one-line explanation of `code` for `kernel` into buf (always NUL-terminated). */
void kg_rt_describe(const kg_kernel_info* kernel, int32_t code, char* buf, size_t size);

/* Re-reads every module's kill switch from the environment on next use. */
void kg_rt_refresh(void);

/* The target this library was built for, e.g. "hopper", and its compute capability. */
const char* kg_rt_target(void);
int32_t kg_rt_target_cc(void); /* major * 10 + minor */

/* The device values plans use now: the current device's, queried once per device, when its
 * compute capability is the target's; the target's table otherwise (no GPU, another GPU, or
 * kg_rt_use_target_table(1)). Never NULL. */
const kg_device_values* kg_rt_device_values(void);
/* The target's table, whatever the device. */
const kg_device_values* kg_rt_target_table(void);
/* 1: plans (and the plans launches make) use the target's table even on a GPU, so they give
 * the answers of a machine without one (the generated contract tests use this); 0: the
 * default. Process-wide. */
void kg_rt_use_target_table(int32_t on);
/* n > 0: plans (and the plans launches make) see at most n SMs (device.sm_count, and the
 * co-residency bound of cooperative launches), as on a part with fewer SMs or inside a green
 * context confined to n of the device's SMs, which CUDA's device attributes do not report;
 * 0: no limit (the default). Process-wide, per target library. */
void kg_rt_limit_sms(int32_t n);

/* CUDA queries the bindings need, answered by this library's CUDA runtime. */
int32_t kg_rt_device_count(void);
int32_t kg_rt_current_device(void); /* -1 when none */
int32_t kg_rt_device_cc(int32_t device); /* major * 10 + minor, -1 on error */
int32_t kg_rt_is_sticky_error(int32_t cuda_error);

#ifdef __cplusplus
}
#endif

#endif /* KERNELGEN_ABI_H */
