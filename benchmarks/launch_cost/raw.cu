// Host launch cost from C++: the floor (a raw <<<>>> loop of the probe kernel) and kernelgen's
// generated launchers (the C++ stub and the C ABI) for the same kernel, in one process.
//
// Method (the same as benchmarks/bench_launch_cost.py): bursts of 64 launches, each burst
// timed on the host clock and followed by an untimed stream synchronisation, so the launch
// queue never fills and the GPU never throttles the host; the per-launch time of a burst is
// its time / 64; the statistic is the median over many bursts after a warm-up. The variants
// are interleaved (round r times one burst of every variant in turn), so a drift of the
// machine's launch cost over the run (seen: 4.8 -> 3.8 us within seconds on a VM) moves all
// of them alike instead of biasing whichever ran during a slow spell; --sequential measures
// one variant after another instead.
//
// Built by bench_launch_cost.py on the GPU machine:
//   nvcc -O2 -std=c++17 -arch=sm_90a -I<project>/generated/hopper/include
//        -I<repo>/src/kernelgen/runtime/include -I<project>/kernels raw.cu
//        -L<lib dir> -l:libkernelgen_hopper[_<hash>].so -Xlinker -rpath -Xlinker <lib dir> -o raw_launch_cost
// Usage: raw_launch_cost [--bursts N] [--warmup N] [--sequential]   (prints one JSON object)
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "kernelgen/launch_probe.h"
#include "kernelgen/launch_probe_c.h"

// The same kernel source, renamed so this executable's copy cannot interpose on the
// library's launch_probe_kernel (both have external linkage).
#define launch_probe_kernel raw_launch_probe_kernel
#include "launch_probe.cu"
#undef launch_probe_kernel

namespace {

constexpr int kBurst = 64;

#define CHECK(call)                                                                              \
  do {                                                                                           \
    cudaError_t e_ = (call);                                                                     \
    if (e_ != cudaSuccess) {                                                                     \
      std::fprintf(stderr, "raw_launch_cost: %s:%d: %s: %s\n", __FILE__, __LINE__, #call,         \
                   cudaGetErrorString(e_));                                                      \
      std::exit(1);                                                                              \
    }                                                                                            \
  } while (0)

struct Args {
  const __nv_bfloat16* a;
  const __nv_bfloat16* b;
  const float* c;
  int32_t* d;
  __nv_bfloat16* out;
  uint32_t n, slot, k0, k1, k2;
  float alpha;
};

struct Stats {
  double median, p10, p90, min, mean;
};

using Clock = std::chrono::steady_clock;

// One variant: its samples (us per launch, one per burst) and the stream it synchronises.
struct Series {
  const char* name;
  const char* what;
  cudaStream_t stream;
  std::vector<double> us;
};

template <class F>
void warm(F& f, cudaStream_t stream, int warmup) {
  for (int w = 0; w < warmup; ++w) {
    for (int i = 0; i < kBurst; ++i) f();
    CHECK(cudaStreamSynchronize(stream));
  }
}

template <class F>
void burst(F& f, Series& s) {
  const auto t0 = Clock::now();
  for (int i = 0; i < kBurst; ++i) f();
  const auto t1 = Clock::now();
  CHECK(cudaStreamSynchronize(s.stream));
  s.us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count() / kBurst);
}

// Times `bursts` bursts of kBurst calls of each f (series[i] for fs[i]), after `warmup`
// untimed bursts of each: interleaved (one burst of each in turn) or one variant at a time.
template <size_t... I, class... F>
void measure_all(std::index_sequence<I...>, Series* series, int bursts, int warmup, bool sequential, F&... fs) {
  (warm(fs, series[I].stream, warmup), ...);
  for (size_t i = 0; i < sizeof...(F); ++i) series[i].us.reserve(static_cast<size_t>(bursts));
  if (sequential) {
    ((warm(fs, series[I].stream, warmup / 4), [&] {
       for (int r = 0; r < bursts; ++r) burst(fs, series[I]);
     }()), ...);
  } else {
    for (int r = 0; r < bursts; ++r) (burst(fs, series[I]), ...);
  }
  CHECK(cudaGetLastError());
}

Stats stats_of(std::vector<double> us) {
  Stats s{};
  double sum = 0;
  for (double v : us) sum += v;
  std::sort(us.begin(), us.end());
  const size_t n = us.size();
  s.median = n % 2 ? us[n / 2] : 0.5 * (us[n / 2 - 1] + us[n / 2]);
  s.p10 = us[n / 10];
  s.p90 = us[(n * 9) / 10];
  s.min = us[0];
  s.mean = sum / static_cast<double>(n);
  return s;
}

std::string stats_json(const char* name, const Stats& s, const char* what) {
  char buf[640];
  std::snprintf(buf, sizeof buf,
                "    \"%s\": {\"us_per_launch\": %.5f, \"p10\": %.5f, \"p90\": %.5f, \"min\": %.5f, \"mean\": %.5f, "
                "\"what\": \"%s\"}",
                name, s.median, s.p10, s.p90, s.min, s.mean, what);
  return buf;
}

int counter(const Args& x) {
  int v = 0;
  CHECK(cudaMemcpy(&v, x.d, sizeof v, cudaMemcpyDeviceToHost));
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  int bursts = 2000, warmup = 200;
  bool sequential = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--sequential") == 0) sequential = true;
    else if (i + 1 < argc && std::strcmp(argv[i], "--bursts") == 0) bursts = std::atoi(argv[++i]);
    else if (i + 1 < argc && std::strcmp(argv[i], "--warmup") == 0) warmup = std::atoi(argv[++i]);
  }
  if (bursts < 10) bursts = 10;

  CHECK(cudaSetDevice(0));
  cudaDeviceProp prop{};
  CHECK(cudaGetDeviceProperties(&prop, 0));
  int runtime_version = 0, driver_version = 0;
  CHECK(cudaRuntimeGetVersion(&runtime_version));
  CHECK(cudaDriverGetVersion(&driver_version));

  // Inputs: a = 1, b = 2 (bf16), c = 0.5, so out[slot] = 3.5 + alpha * (k0 + k1 + k2), exact.
  const uint32_t n = 4096;
  void *pa, *pb, *pc, *pd, *pout;
  CHECK(cudaMalloc(&pa, 2));
  CHECK(cudaMalloc(&pb, 2));
  CHECK(cudaMalloc(&pc, 4));
  CHECK(cudaMalloc(&pd, 4));
  CHECK(cudaMalloc(&pout, 2 * n));
  const uint16_t one = 0x3F80, two = 0x4000;
  const float half = 0.5f;
  CHECK(cudaMemcpy(pa, &one, 2, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(pb, &two, 2, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(pc, &half, 4, cudaMemcpyHostToDevice));
  CHECK(cudaMemset(pd, 0, 4));
  CHECK(cudaMemset(pout, 0, 2 * n));
  const Args x{static_cast<const __nv_bfloat16*>(pa), static_cast<const __nv_bfloat16*>(pb),
               static_cast<const float*>(pc), static_cast<int32_t*>(pd), static_cast<__nv_bfloat16*>(pout),
               n, 3, 5, 6, 7, 0.25f};
  Args empty = x;
  empty.n = 0;  // skip_if n == 0: the stub plans and returns "not launched"
  const dim3 grid((x.n + 255) / 256), block(256);

  cudaStream_t side = nullptr;
  CHECK(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking));

  bool ok = true;
  auto raw_on = [&](cudaStream_t s) {
    return [&, s] {
      raw_launch_probe_kernel<<<grid, block, 0, s>>>(x.a, x.b, x.c, x.d, x.out, x.n, x.slot, x.k0, x.k1, x.k2,
                                                     x.alpha);
    };
  };
  auto raw_checked = [&] {
    raw_launch_probe_kernel<<<grid, block, 0, nullptr>>>(x.a, x.b, x.c, x.d, x.out, x.n, x.slot, x.k0, x.k1, x.k2,
                                                         x.alpha);
    ok &= cudaGetLastError() == cudaSuccess;
  };
  auto stub_on = [&](cudaStream_t s) {
    return [&, s] {
      ok &= kernelgen::launch_probe::probe(x.a, x.b, x.c, x.d, x.out, x.n, x.slot, x.k0, x.k1, x.k2, x.alpha, s)
                .launched();
    };
  };
  auto c_abi = [&] {
    ok &= kg_launch_probe__probe(x.a, x.b, x.c, x.d, x.out, x.n, x.slot, x.k0, x.k1, x.k2, x.alpha, nullptr,
                                 nullptr) == KG_LAUNCHED;
  };
  bool skipped = true;
  auto stub_skip = [&] {
    const kernelgen::Outcome o = kernelgen::launch_probe::probe(empty.a, empty.b, empty.c, empty.d, empty.out, empty.n,
                                                                empty.slot, empty.k0, empty.k1, empty.k2, empty.alpha);
    skipped &= !o.launched() && !o.error();
  };
  volatile int64_t sink = 0;
  auto plan_only = [&] {
    const kg_plan p = kernelgen::launch_probe::plan_probe(x.n, x.slot, x.k0, x.k1, x.k2);
    sink = sink + p.grid[0];
  };
  auto get_device = [&] {  // what the stub's KernelSlot::prepare and the binding's device check call
    int dev = -1;
    ok &= cudaGetDevice(&dev) == cudaSuccess;
    sink = sink + dev;
  };
  auto get_last_error = [&] { ok &= cudaGetLastError() == cudaSuccess; };

  auto raw_default = raw_on(nullptr);
  auto raw_side = raw_on(side);
  auto stub_default = stub_on(nullptr);
  auto stub_side = stub_on(side);
  Series series[] = {
      {"raw_cpp", "raw <<<>>> loop, legacy default stream (the floor)", nullptr, {}},
      {"raw_cpp_checked", "raw <<<>>> + cudaGetLastError() per launch, default stream", nullptr, {}},
      {"kernelgen_cpp_stub", "kernelgen::launch_probe::probe(...), default stream", nullptr, {}},
      {"kernelgen_c_abi", "kg_launch_probe__probe(...) (C ABI), default stream", nullptr, {}},
      {"raw_cpp_side_stream", "raw <<<>>> loop on a created non-blocking stream", side, {}},
      {"kernelgen_cpp_stub_side_stream", "generated C++ stub on a created non-blocking stream", side, {}},
      {"kernelgen_cpp_stub_not_launched", "generated C++ stub with n = 0 (skip_if): plan only, no launch", nullptr, {}},
      {"kernelgen_cpp_plan", "plan_probe(...) alone: applicability and geometry arithmetic", nullptr, {}},
      {"cuda_get_device", "cudaGetDevice() alone (no launch)", nullptr, {}},
      {"cuda_get_last_error", "cudaGetLastError() alone (no launch)", nullptr, {}},
  };
  constexpr size_t kSeries = sizeof(series) / sizeof(series[0]);
  measure_all(std::make_index_sequence<kSeries>{}, series, bursts, warmup, sequential, raw_default, raw_checked,
              stub_default, c_abi, raw_side, stub_side, stub_skip, plan_only, get_device, get_last_error);
  std::vector<std::string> rows;
  for (const Series& sr : series) rows.push_back(stats_json(sr.name, stats_of(sr.us), sr.what));

  // Correctness: each path launches the same kernel; 10 launches each bump the counter by 10.
  CHECK(cudaDeviceSynchronize());
  CHECK(cudaMemset(pd, 0, 4));
  CHECK(cudaMemset(pout, 0, 2 * n));
  for (int i = 0; i < 10; ++i) raw_on(nullptr)();
  CHECK(cudaDeviceSynchronize());
  const int after_raw = counter(x);
  for (int i = 0; i < 10; ++i) stub_on(nullptr)();
  CHECK(cudaDeviceSynchronize());
  const int after_stub = counter(x);
  uint16_t out_bits = 0;
  CHECK(cudaMemcpy(&out_bits, static_cast<char*>(pout) + 2 * x.slot, 2, cudaMemcpyDeviceToHost));
  // 3.5 + 0.25 * 18 = 8.0 = bf16 0x4100
  const bool check = ok && skipped && after_raw == 10 && after_stub == 20 && out_bits == 0x4100;

  std::printf("{\n  \"device\": \"%s\",\n  \"cuda_runtime\": %d,\n  \"cuda_driver\": %d,\n", prop.name,
              runtime_version, driver_version);
  std::printf("  \"bursts\": %d,\n  \"warmup_bursts\": %d,\n  \"launches_per_burst\": %d,\n", bursts, warmup, kBurst);
  std::printf("  \"schedule\": \"%s\",\n", sequential ? "sequential" : "interleaved");
  std::printf("  \"check\": {\"passed\": %s, \"counter_after_raw\": %d, \"counter_after_stub\": %d, "
              "\"out_bits\": \"0x%04x\", \"all_launched\": %s, \"skip_not_launched\": %s},\n",
              check ? "true" : "false", after_raw, after_stub, out_bits, ok ? "true" : "false",
              skipped ? "true" : "false");
  std::printf("  \"results\": {\n");
  for (size_t i = 0; i < rows.size(); ++i) std::printf("%s%s\n", rows[i].c_str(), i + 1 < rows.size() ? "," : "");
  std::printf("  }\n}\n");
  CHECK(cudaStreamDestroy(side));
  return check ? 0 : 3;
}
