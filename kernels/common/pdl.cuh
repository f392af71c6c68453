// Programmatic dependent launch, the device side of a spec's `launch: {programmatic_dependent:
// true}`: the launcher lets such a kernel start while the kernel before it on the stream still
// runs, and the kernel orders itself with these two instructions.
//
// pdl_release(): this CTA no longer holds back the next kernel on the stream; once every CTA of
// this grid has released (or exited) the next one may start placing its CTAs. It orders nothing:
// the next kernel still waits in its own pdl_wait(), so releasing anywhere is safe. Where is a
// matter of speed: the next kernel's CTAs then sit on the SMs beside this one's until it ends.
// Short kernels release at their start; the streaming ones (the GEMVs, the attention) once
// their main stream is done, so that the next kernel's prefetch overlaps only their tail
// (released at the start, chains of FP8 GEMVs measured up to 26% slower on the H200).
//
// pdl_wait(): returns once the kernel this one depends on has completed and its writes are
// visible; at once when launched without the attribute (KERNELGEN_NO_PDL, or a plain launch).
// Before it a kernel may only read what no earlier kernel writes (weights, scales) and write
// nothing. Every CTA reaches it before any early return: a grid completes after its wait, so
// the kernel after it transitively waits for every kernel before.
//
// Both need sm_90; the catalog's targets (sm_90a, sm_121a) have them.
#pragma once

namespace kcommon {

static __device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

static __device__ __forceinline__ void pdl_release() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// The usual start of a kernel with nothing to prefetch: release the next kernel, then wait for
// the previous one.
static __device__ __forceinline__ void pdl_enter() {
    pdl_release();
    pdl_wait();
}

}  // namespace kcommon
