"""kernelgen: YAML kernel specs -> CUDA launchers, C ABI and Python bindings, per GPU target."""

__version__ = "0.1.0"
