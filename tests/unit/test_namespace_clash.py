"""A package named like a namespace of the sources: the generated C++ launchers of module M live in
``<namespace>::M`` (the namespace from the package by default), so sources declaring that namespace
with a function named like a launcher would fail the build with only the compiler's error.
`kernelgen generate` (and build) warn, naming the spec and how to give the API its own namespace."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelgen.cli import main
from kernelgen.names import namespace_clashes, source_namespaces


def test_source_namespaces_are_full_names() -> None:
    text = """
    namespace engine { namespace norm { struct P { int f() { return 1; } }; } }
    namespace a::b { namespace { int hidden; } }
    namespace c { inline namespace v1 { namespace d {} } }
    // namespace commented { }
    const char* s = "namespace quoted {";
    namespace fs = std::filesystem;
    using namespace std;
    """
    assert source_namespaces(text) == {"engine", "engine::norm", "a::b", "c", "c::v1", "c::v1::d"}


def test_namespace_clashes_names_the_launchers_the_sources_declare() -> None:
    src = "namespace engine::norm {\nvoid epilogue(float* c) {}\n// layer_norm(x)\n}\n"
    assert namespace_clashes(src, "engine::norm", ["epilogue", "layer_norm"]) == ["epilogue"]
    assert namespace_clashes(src, "engine::norm", ["layer_norm"]) == []
    assert namespace_clashes(src, "engine_api::norm", ["epilogue"]) is None
    assert namespace_clashes("namespace engine { namespace norm { int plan_epilogue(); } }", "engine::norm",
                             ["epilogue"]) == ["plan_epilogue"]


def _project(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    root = tmp_path / "engine"
    assert main(["init", str(root), "--package", "engine", "--target", "hopper"]) == 0
    (root / "kernels" / "scale.cu").write_text(
        "#pragma once\n#include <cstdint>\nnamespace engine { namespace scale {\n"
        "__global__ void scale_kernel(const float* x, float* out, uint32_t n, float alpha) {}\n"
        "void scale_f32(const float* x, float* out, uint32_t n, float alpha) {}  // the project's own host API\n"
        "} }\n")
    spec = root / "specs" / "scale.yaml"
    spec.write_text(spec.read_text().replace("symbol: scale_kernel ", "symbol: engine::scale::scale_kernel "))
    capsys.readouterr()
    return root


def test_generate_warns_naming_the_spec_and_the_remedy(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = _project(tmp_path, capsys)
    assert main(["--root", str(root), "generate"]) == 0
    err = capsys.readouterr().err
    assert "kernelgen: warning: specs/scale.yaml:1: module 'scale': kernels/scale.cu declares namespace " \
           "engine::scale, where the generated C++ launchers of the module live" in err, err
    assert "names scale_f32 there too" in err and "`namespace: engine_api` in specs/project.yaml" in err, err
    # the remedy: the generated API in a namespace of its own; the package keeps its name
    with (root / "specs" / "project.yaml").open("a") as f:
        f.write("namespace: engine_api\n")
    assert main(["--root", str(root), "generate"]) == 0
    assert "warning" not in capsys.readouterr().err
    assert "namespace engine_api::scale" in (root / "generated" / "hopper" / "include" / "engine_api" /
                                             "scale.h").read_text()
