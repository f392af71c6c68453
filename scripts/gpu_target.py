#!/usr/bin/env python3
"""The target of specs/targets.yaml that the GPU present builds for (its compute capability),
printed for the GPU scripts (gpu_check.sh, gpu_ab.sh); exit status 1 when no target matches."""

from __future__ import annotations

import sys
from pathlib import Path

import torch

from kernelgen.loader import load_targets

ROOT = Path(__file__).resolve().parent.parent

cc = torch.cuda.get_device_capability()
targets = {t.compute_capability: t.name for t in load_targets(ROOT / "specs" / "targets.yaml", ROOT)}
if cc not in targets:
    sys.exit(f"no target of specs/targets.yaml is for compute capability {cc[0]}.{cc[1]}")
print(targets[cc])
