// The optional fast reader of torch tensors: kernelgen_ops.<target>._torch_fast, built when
// torch is installed at build time, exports one C function through a capsule. The bindings
// use it for plain torch.Tensor objects (no subclasses) and fall back to Python attribute
// calls wherever it declines, so behaviour is the same with or without it.
#pragma once

#include <Python.h>

#include <cstdint>

namespace kg::py {

struct TensorView {
  uint64_t data;       // data_ptr()
  int64_t numel;
  int32_t dtype;       // TorchCode (kernelgen/types.h), 0 for other dtypes
  int32_t device;      // CUDA device index, -1 when not a CUDA tensor
  int32_t contiguous;  // is_contiguous()
  int64_t span;        // items from data_ptr() to the last item + 1 (numel when contiguous; 0 when empty)
  int32_t negative;    // some dimension of more than one item has a negative stride
};

// Returns 1 and fills `out` for a plain torch.Tensor, 0 to decline (the caller then uses
// the Python path, which also produces the error messages).
using TensorReader = int (*)(PyObject* obj, TensorView* out);

constexpr const char* kTorchReaderCapsule = "kernelgen_ops._torch_fast.reader";

}  // namespace kg::py
