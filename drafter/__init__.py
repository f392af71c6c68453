"""A whole DFlash2 draft step on the generated kernels (kernelgen_ops), captured once in a CUDA
graph, with a pure-torch reference (drafter.reference) and torch baselines (drafter.torch_step).

    from drafter import QWEN3_8B, DrafterStep, make_weights
    weights = make_weights(QWEN3_8B)            # random, on the GPU, FP8 by the catalog's quantizer
    step = DrafterStep(weights, max_context=8192)
    step.append_context(target_hidden)          # [N, 3 * 4096] bf16: fc, norms, k/v, RoPE, cache writes
    step.set_step(anchor)                       # device-side positions, ids, kv_len, slots
    step.capture()                              # once; afterwards set_step(...) then step.replay()
    step.drafted                                # [1, 15] int32 drafted ids

See drafter/step.py for the structure of the step.
"""

from .config import BLOCK, HEAD_DIM, QWEN3_8B, DrafterConfig
from .step import DrafterStep
from .weights import DrafterWeights, Fp8Weight, Nvfp4Weight, make_weights

__all__ = ["BLOCK", "HEAD_DIM", "QWEN3_8B", "DrafterConfig", "DrafterStep", "DrafterWeights", "Fp8Weight",
           "Nvfp4Weight", "make_weights"]
