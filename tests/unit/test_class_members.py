"""The integer members of the sources' class types and class template instances
(kernelgen.class_members), as a launch names them: declared values, template arguments and their
defaults, base classes, enumerators, sizeof, C++ integer arithmetic; None for what is not written
so."""

from __future__ import annotations

import re

import pytest

from kernelgen.class_members import ClassTable, local_aliases, scan, type_size

TRAITS = """
template <int kHeadDim_, int kBlockM_, int kBlockN_, int kNWarps_, typename elem_type = half>
struct Base_traits {
    using Element = elem_type;
    static constexpr int kNWarps = kNWarps_;
    static constexpr int kNThreads = kNWarps * 32;
    enum { kPad = 8, kAfter, kWide = kAfter * 2 };
};
template <int kHeadDim_, int kBlockM_, int kBlockN_, int kNWarps_, bool Is_Q_in_regs_ = false,
          typename elem_type = half, typename Base = Base_traits<kHeadDim_, kBlockM_, kBlockN_, kNWarps_, elem_type>>
struct Fwd_traits : public Base {
    using Element = typename Base::Element;
    static constexpr int kBlockM = kBlockM_;
    static constexpr int kHeadDim = kHeadDim_;
    static constexpr bool Is_Q_in_regs = Is_Q_in_regs_;
    static constexpr int kSmemQ = kBlockM * kHeadDim * sizeof(Element);
    static constexpr int kSmemKV = kBlockN_ * kHeadDim * 2 * sizeof(Element);
    static constexpr int kSmemSize = Is_Q_in_regs ? (kSmemQ > kSmemKV ? kSmemQ : kSmemKV) : kSmemQ + kSmemKV;
    static constexpr int kRounded = (kBlockM + 100) / 64 * 64;
    static constexpr int kNegative = -7 / 2;
    static constexpr int kLayout = cute::size(SmemLayoutQ{});
    struct Inner { static constexpr int kBlockM = 1; };
    void f() { constexpr static int kLocal = 5; }
};
struct Plain { static const unsigned kThreads = 256u; static constexpr int kRows{4}; };
template <int N> struct Cfg { static constexpr int kThreads = N * kScale; };
using Default = Fwd_traits<64, 64, 32, 4>;
"""


@pytest.fixture(scope="module")
def table() -> ClassTable:
    return ClassTable(TRAITS, {"kScale": 3})


@pytest.mark.parametrize(("cls", "member", "value"), [
    ("Fwd_traits<128, 128, 64, 4, false, __half>", "kBlockM", 128),
    ("Fwd_traits<128, 128, 64, 4, false, __half>", "kNThreads", 128),  # from the base its default names
    ("Fwd_traits<128, 128, 64, 4, false, __half>", "kSmemSize", 128 * 128 * 2 + 64 * 128 * 2 * 2),
    ("Fwd_traits<128, 128, 64, 4, true, float>", "kSmemSize", 64 * 128 * 2 * 4),  # ?: and sizeof(float)
    ("Fwd_traits<128, 128, 64, 8, false, cutlass::half_t>", "kNWarps", 8),
    ("Fwd_traits<128, 128, 64, 8>", "Is_Q_in_regs", 0),  # defaults
    ("Fwd_traits<128, 128, 64, 8>", "kRounded", 192),
    ("Fwd_traits<128, 128, 64, 8>", "kNegative", -3),  # division truncates toward zero
    ("Fwd_traits<128, 128, 64, 8>", "kPad", 8),  # enumerators, counted on from the one before
    ("Fwd_traits<128, 128, 64, 8>", "kWide", 18),
    ("Plain", "kThreads", 256),
    ("Plain", "kRows", 4),
    ("Cfg<64>", "kThreads", 192),  # a constant of the sources
])
def test_members_evaluate(table: ClassTable, cls: str, member: str, value: int) -> None:
    assert table.member(cls, member) == value


@pytest.mark.parametrize(("cls", "member"), [
    ("Fwd_traits<128, 128, 64, 8>", "kLayout"),  # computed by a function
    ("Fwd_traits<128, 128, 64, 8>", "kLocal"),  # a function's, not the class's
    ("Fwd_traits<128, 128, 64, 8>", "kMissing"),
    ("Fwd_traits<128, 128, 64, 8, false, Unknown>", "kSmemQ"),  # sizeof a type nothing names
    ("Fwd_traits<128>", "kBlockM"),  # parameters without a value
    ("Cfg<64, 2>", "kThreads"),  # more arguments than parameters
    ("Nowhere<1>", "kThreads"),
])
def test_what_is_not_written_so_has_no_value(table: ClassTable, cls: str, member: str) -> None:
    assert table.member(cls, member) is None


def test_a_nested_class_member_is_not_the_outer_one() -> None:
    table = ClassTable("struct A { struct B { static constexpr int k = 1; }; static constexpr int k = 2; };")
    assert table.member("A", "k") == 2


def test_put_replaces_the_members_a_launch_names(table: ClassTable) -> None:
    put = table.put("(n + Fwd_traits<128, 128, 64, 4>::kBlockM - 1) / Fwd_traits<128, 128, 64, 4>::kBlockM")
    assert put == "(n + 128 - 1) / 128"
    assert table.put("Default::kNThreads * 2") == "128 * 2"  # a namespace-scope alias
    assert table.put("Traits::kSmemSize", {"Traits": "Fwd_traits<64, 64, 64, 4>"}) == str(64 * 64 * 2 + 64 * 64 * 2 * 2)
    # what has no value, a call and a namespace's name stay as written
    assert table.put("Fwd_traits<1, 1, 1, 1>::kLayout + std::max(a, b) + cutlass::half_t") == \
        "Fwd_traits<1, 1, 1, 1>::kLayout + std::max(a, b) + cutlass::half_t"


def test_local_aliases() -> None:
    body = "using KT = Fwd_traits<128, 64>; typedef typename KT::Element E; typedef Cfg<32> C;"
    assert local_aliases(body) == {"KT": "Fwd_traits<128, 64>", "E": "KT::Element", "C": "Cfg<32>"}


def test_type_sizes_and_scanning() -> None:
    assert (type_size("__nv_bfloat16"), type_size("cutlass::half_t"), type_size("double")) == (2, 2, 8)
    assert type_size("SmemLayout") is None
    rx = re.compile(r"\s*(\d+|[-+])")
    assert [m.group(1) for m in scan(rx, " 1 + 22 ") or []] == ["1", "+", "22"]
    assert scan(rx, "1 + x") is None


def test_values_beyond_64_bits_have_none() -> None:
    table = ClassTable("struct S { static constexpr long long kBig = 1 << 70; static constexpr long long kMul = "
                       "(1LL << 62) * 8; static constexpr int kOk = (1 << 20) * 3; };")
    assert (table.member("S", "kBig"), table.member("S", "kMul"), table.member("S", "kOk")) == (None, None, 3 << 20)
