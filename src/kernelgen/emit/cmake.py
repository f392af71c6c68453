"""The target's CMake list and the package's CMake config: the only place that spells CMake."""

from __future__ import annotations

from kernelgen import names
from kernelgen.emit.base import render, stamp
from kernelgen.emit.cpp import STRUCT_HEADER_DIR
from kernelgen.model import Catalog, Target


def include_dir(d: str) -> str:
    """A `build.include_dirs` folder as CMake reads it: relative ones from the project root."""
    return d if d.startswith("/") else "${KERNELGEN_ROOT}/" + d


def render_target(t: Target, modules: list[str], lib_name: str, catalog: Catalog) -> dict[str, str]:
    builds = [
        {
            "module": m.name,
            "include_dirs": [include_dir(d) for d, _ in b.include_dirs],
            "defines": b.define_texts,
            "nvcc_flags": list(b.nvcc_flags),
        }
        for m in catalog.modules
        if (b := catalog.module_build(m, t))
    ]
    # Each struct's header and the project's headers it includes (kernelgen.loader.header_files), under
    # the package's own header folder (include/<header_dir>/kg_headers/<path>), which the API headers
    # include them from: a program including two packages' API headers gets each one's own files,
    # whatever its include path holds.
    installs: dict[str, str] = {}
    for m in catalog.modules:
        for st in m.structs:
            for src, dest in st.files or ([(st.header, st.header)] if st.header else []):
                installs.setdefault(dest, src)
    headers: dict[str, list[str]] = {}
    for dest in sorted(installs):
        headers.setdefault(dest.rpartition("/")[0], []).append(dest)
    ctx = {
        "t": t,
        "modules": modules,
        "builds": builds,
        "struct_files": sorted((src, dest) for dest, src in installs.items()),
        "struct_headers": sorted(headers.items()),
        "struct_header_dir": f"{names.current().header_dir}/{STRUCT_HEADER_DIR}",
        "lib_name": lib_name,
        "stamp": stamp("specs/targets.yaml and the module specs"),
        "cc_number": t.compute_capability[0] * 10 + t.compute_capability[1],
    }
    return {"CMakeLists.txt": render("CMakeLists.txt.j2", ctx),
            "package_target.cmake": render("package_target.cmake.j2", ctx)}


def package_config(catalog: Catalog, wheel: bool = False) -> str:
    """The package's ``<package>-config.cmake`` (installed with the package's shell, see
    kernelgen.project): find_package(<package> CONFIG COMPONENTS <target>...) for C++ programs, one
    imported library per built target (each target's ``package_target.cmake``). ``wheel``: the
    package of a wheel (its "not built" messages say how the wheel is built with the target), else
    of ``kernelgen build``."""
    return render("package_config.cmake.j2", {
        "stamp": stamp("specs/targets.yaml and specs/project.yaml"),
        "pkg": catalog.naming.package,
        "namespace": catalog.naming.namespace,
        "targets": " ".join(t.name for t in catalog.targets),
        "project": catalog.naming,
        "wheel": wheel,
    })


# CMake's SameMajorVersion rule (as write_basic_package_version_file writes it): a version asked for
# is met by this one when both have the same major version and this one is not older; a version
# range, by a version inside it. The libraries are 64-bit.
_VERSION_FILE = """\
# @STAMP@
#
# The @PKG@ package's version, for find_package(@PKG@ <version> CONFIG ...): the project's
# version (pyproject.toml's [project] version). Compatible (CMake's SameMajorVersion): the same
# major version, not older than the one asked for; for a version range, any version inside it.
set(PACKAGE_VERSION "@VERSION@")
if(PACKAGE_FIND_VERSION_RANGE)
  if((PACKAGE_FIND_VERSION_RANGE_MIN STREQUAL "INCLUDE" AND PACKAGE_VERSION VERSION_LESS PACKAGE_FIND_VERSION_MIN)
     OR (PACKAGE_FIND_VERSION_RANGE_MAX STREQUAL "INCLUDE" AND PACKAGE_VERSION VERSION_GREATER PACKAGE_FIND_VERSION_MAX)
     OR (PACKAGE_FIND_VERSION_RANGE_MAX STREQUAL "EXCLUDE"
         AND PACKAGE_VERSION VERSION_GREATER_EQUAL PACKAGE_FIND_VERSION_MAX))
    set(PACKAGE_VERSION_COMPATIBLE FALSE)
  else()
    set(PACKAGE_VERSION_COMPATIBLE TRUE)
  endif()
elseif(PACKAGE_VERSION VERSION_LESS PACKAGE_FIND_VERSION)
  set(PACKAGE_VERSION_COMPATIBLE FALSE)
else()
  string(REGEX MATCH "^[0-9]+" _@PKG@_major "${PACKAGE_VERSION}")
  if(PACKAGE_FIND_VERSION_MAJOR STREQUAL _@PKG@_major)
    set(PACKAGE_VERSION_COMPATIBLE TRUE)
  else()
    set(PACKAGE_VERSION_COMPATIBLE FALSE)
  endif()
  if(PACKAGE_FIND_VERSION STREQUAL PACKAGE_VERSION)
    set(PACKAGE_VERSION_EXACT TRUE)
  endif()
endif()
if(CMAKE_SIZEOF_VOID_P AND NOT CMAKE_SIZEOF_VOID_P STREQUAL "8")
  set(PACKAGE_VERSION "${PACKAGE_VERSION} (64bit)")
  set(PACKAGE_VERSION_UNSUITABLE TRUE)
endif()
"""


def package_config_version(catalog: Catalog, version: str) -> str:
    """The package's ``<package>-config-version.cmake``: ``version`` (MAJOR[.MINOR[.PATCH[.TWEAK]]],
    or a CMake ``@VARIABLE@`` for configure_file to fill in) for find_package(<package> <version>)."""
    return (_VERSION_FILE.replace("@STAMP@", stamp("pyproject.toml's [project] version"))
            .replace("@PKG@", catalog.naming.package).replace("@VERSION@", version))
