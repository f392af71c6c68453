"""The drafter's shape and hyper-parameters (a Qwen3-8B-shaped DFlash2 head by default)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

BLOCK = 16  # rows of a draft block: dflash2_conv2's mask period, dflash2_topk16's TOP, the walk's slots + 1
HEAD_DIM = 128  # rope_qwen3 and the drafter attention exist for head_dim 128 only


@dataclass(frozen=True)
class DrafterConfig:
    """Shapes of the draft head. The defaults are the Qwen3-8B target's (DESIGN.md section 5).

    ``sliding_layers`` lists the layers whose attention has a sliding window of
    ``sliding_window`` keys; the others see the whole context. ``target_layers`` is the number
    of target hidden states concatenated into one context row (the fc projection's input is
    ``target_layers * hidden`` wide). ``lm_head`` picks the lm_head's weight format for the
    step: ``"fp8"`` (fp8_linear chain) or ``"nvfp4"`` (w4a16_linear chain).
    """

    hidden: int = 4096
    num_q_heads: int = 32
    num_kv_heads: int = 8
    head_dim: int = HEAD_DIM
    intermediate: int = 12288
    vocab: int = 151936
    num_layers: int = 5
    block: int = BLOCK
    target_layers: int = 3
    rms_eps: float = 1e-6
    rope_theta: float = 1e6
    sliding_window: int = 2048
    sliding_layers: tuple[int, ...] = field(default=(0, 2))
    selector_rank: int = 256
    kv_block_size: int = 16
    unary_multiplier: float = 1.0
    unary_cap: float = 30.0
    lm_head: str = "fp8"

    @property
    def q_dim(self) -> int:
        return self.num_q_heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        return self.num_kv_heads * self.head_dim

    @property
    def slots(self) -> int:
        """Drafted tokens per step: the block's rows after the anchor."""
        return self.block - 1

    @property
    def mask_token_id(self) -> int:
        return self.vocab - 1

    @property
    def conv_groups(self) -> int:
        return self.hidden // 16

    def is_sliding(self, layer: int) -> bool:
        return layer in self.sliding_layers

    def window(self, layer: int) -> int:
        return self.sliding_window if self.is_sliding(layer) else 0

    def with_(self, **changes: object) -> DrafterConfig:
        return replace(self, **changes)

    def validate(self) -> None:
        """The catalog kernels' requirements on these shapes (their applies_if / requires)."""
        errors = []
        if self.head_dim != HEAD_DIM:
            errors.append("head_dim must be 128 (rope_qwen3, attn_dflash)")
        if self.block != BLOCK:
            errors.append("block must be 16 (dflash2_conv2 blocks, dflash2_topk16, selector walk slots <= 16)")
        if self.num_kv_heads <= 0 or self.num_q_heads % self.num_kv_heads:
            errors.append("num_q_heads must be a multiple of num_kv_heads (attn_dflash)")
        if self.hidden % 16 or self.hidden < 16:
            errors.append("hidden must be a multiple of 16 (dflash2_conv2, FP8 GEMVs)")
        if self.intermediate % 16:
            errors.append("intermediate must be a multiple of 16 (silu_mul, FP8 GEMV K)")
        if (self.target_layers * self.hidden) % 16:
            errors.append("target_layers * hidden must be a multiple of 16")
        if not 16 <= self.vocab <= 32 * 16384:
            errors.append("vocab must lie in [16, 524288] (dflash2_topk16)")
        if self.selector_rank % 32 or not 32 <= self.selector_rank <= 512:
            errors.append("selector_rank must be a multiple of 32 in [32, 512] (dflash2_selector_walk)")
        if self.kv_block_size < 1:
            errors.append("kv_block_size must be positive")
        if any(not 0 <= i < self.num_layers for i in self.sliding_layers):
            errors.append("sliding_layers must name layers 0 .. num_layers - 1")
        if self.lm_head not in ("fp8", "nvfp4"):
            errors.append("lm_head must be 'fp8' or 'nvfp4'")
        if errors:
            raise ValueError("DrafterConfig: " + "; ".join(errors))


QWEN3_8B = DrafterConfig()
