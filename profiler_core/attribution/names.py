"""Kernel and operator names: one spelling for joins, one clean name for people.

Kineto, nsys and ncu spell one kernel differently, and two ncu exports of one kernel were
seen to differ too. Joins compare :func:`kernel_join_key`; a failed join may retry on
:func:`kernel_base_name` (the bare identifier) and says so.

    "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>(int, T)"
        -> join key "at::vectorized_elementwise_kernel<4, at::FillFunctor<float>>"
        -> base name "vectorized_elementwise_kernel"
    "elemWiseRNNcell<float, float, float, (cudnnRNNMode_t)3, ...>" -> "...float, 3, ..."

NVTX texts written by ``emit_nvtx`` carry arguments: ``"aten::addmm, seq = 28, op_id = 31,
sizes = [[8], [8, 4]], input_op_ids = [...]"``; :func:`parse_nvtx_op` splits them.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

# C-style casts before a number: "(int)4", "(unsigned long)1", "(cudnnRNNMode_t)3"
_CAST = re.compile(r"\((?:(?:unsigned|signed|long|short|const)\s+)*[A-Za-z_][\w:]*\)\s*(?=-?\d)")
_INT_SUFFIX = re.compile(r"(?<=\b\d)(?:ull|ul|ll|u|l)\b|(?<=\d\d)(?:ull|ul|ll|u|l)\b", re.I)  # 1ul -> 1
_LAMBDA = re.compile(r"\{lambda\(([^)]*)\)#(\d+)\}|\[lambda\(([^)]*)\) \(instance (\d+)\)\]")
_PTR_SPACE = re.compile(r"\s+(?=[*&])")  # "char *" -> "char*"
_WS = re.compile(r"\s+")
_NVTX_KEY = re.compile(r",\s*(seq|op_id|sizes|input_op_ids|stream|Sequence number)\s*=\s*")
_OP_NAME = re.compile(r"^[A-Za-z_][\w]*(::|\.)[A-Za-z_][\w.]*$")


def _strip_trailing_params(name: str) -> str:
    """Drop a trailing top-level ``(...)`` parameter list, keeping template arguments."""
    if not name.endswith(")"):
        return name
    depth = 0
    for i in range(len(name) - 1, -1, -1):
        ch = name[i]
        if ch == ")":
            depth += 1
        elif ch == "(":
            depth -= 1
            if depth == 0:
                head = name[:i].rstrip()
                # "(anonymous namespace)" or a bare "(...)" name is not a parameter list
                return head if head and not head.endswith("::") else name
    return name


@lru_cache(maxsize=65536)
def kernel_join_key(name: str) -> str:
    """The spelling of a kernel name that every source agrees on (see module docstring)."""
    key = name.strip()
    if key.startswith("void "):
        key = key[5:]
    key = _strip_trailing_params(key)
    key = key.replace("at::native::", "at::")
    key = _CAST.sub("", key)
    key = _INT_SUFFIX.sub("", key)
    key = _LAMBDA.sub(lambda m: f"lambda({m.group(1) or m.group(3) or ''})#{m.group(2) or m.group(4)}", key)
    key = _PTR_SPACE.sub("", key).replace("operator ()", "operator()")
    key = _WS.sub(" ", key).replace("< ", "<").replace(" >", ">")
    return key


_LAMBDA_TOKEN = re.compile(r"lambda\([^)]*\)#\d+")
_PARENS = re.compile(r"\([^()]*\)")
_NOISE = re.compile(r"\b(?:void|const|struct|class)\b|\s+")


@lru_cache(maxsize=65536)
def kernel_skeleton(name: str) -> str:
    """A kernel name with what demanglers disagree on removed: lambdas, parameter lists, ``const``.

    nsys writes ``[lambda(int) (instance 1)]`` and ``const T1 &`` where Kineto writes
    ``{lambda(int)#1}`` and ``Functor const&``, and ncu drops lambdas altogether; the
    skeleton keeps namespaces and template arguments, so distinct kernels stay distinct.
    """
    key = _LAMBDA_TOKEN.sub("", kernel_join_key(name))
    while True:
        stripped = _PARENS.sub("", key)
        if stripped == key:
            break
        key = stripped
    return _NOISE.sub("", key)


NameKey = Callable[[str], str]


def choose_name_key(reference: Iterable[str], other: Iterable[str]) -> tuple[NameKey, str]:
    """The most exact spelling under which every name of ``other`` occurs in ``reference``.

    Returns (key function, label): "join_key", then "skeleton", then "base_name"; if none
    covers ``other``, the join key (the join then reports the first divergence).
    """
    ref, oth = set(reference), set(other)
    for fn, label in ((kernel_join_key, "join_key"), (kernel_skeleton, "skeleton"), (kernel_base_name, "base_name")):
        if {fn(n) for n in oth} <= {fn(n) for n in ref}:
            return fn, label
    return kernel_join_key, "join_key"


_SOURCE_NAME = re.compile(r"(\d+)")


def mangled_base_name(name: str) -> str | None:
    """The function's own identifier in an Itanium-mangled name, None if ``name`` is not one.

    CUPTI hands Kineto the mangled name where it does not demangle one (a CUTLASS 3 grouped
    GEMM's ``_ZN7cutlass13device_kernelIN2at4cuda...``) while ncu prints it demangled. A kernel
    is a free function, so every component before its own name is a namespace: the identifier
    is the last ``<length><name>`` component before the template arguments (``I``) or the end of
    the nested name (``E``).
    """
    if not name.startswith("_Z"):
        return None
    i = 2
    nested = name.startswith("N", i)
    i += nested
    while i < len(name) and name[i] in "LrVKRO":  # internal linkage, cv and ref qualifiers
        i += 1
    if name.startswith("St", i):  # std::
        i += 2
    last: str | None = None
    while i < len(name):
        match = _SOURCE_NAME.match(name, i)
        if match is None:
            break
        start = match.end()
        length = int(match.group(1))
        if length <= 0 or start + length > len(name):
            return None
        last = name[start:start + length]
        i = start + length
        if not nested:
            break
    return last


@lru_cache(maxsize=65536)
def kernel_base_name(name: str) -> str:
    """The bare identifier of a kernel: no namespaces, template arguments or parameters.

    An Itanium-mangled name (``_ZN7cutlass13device_kernelI...``) gives its identifier too
    (``device_kernel``), so it meets the demangled spelling another tool printed.
    """
    mangled = mangled_base_name(name.strip())
    if mangled:
        return mangled
    key = kernel_join_key(name)
    depth = 0
    out: list[str] = []
    for ch in key:
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif depth == 0:
            out.append(ch)
    bare = "".join(out).strip()
    return bare.rsplit("::", 1)[-1].strip() or key


_QUALIFIER = re.compile(r"(?:[A-Za-z_]\w*::)+")
_SIMPLE_ARG = re.compile(r"-?\w+")


@lru_cache(maxsize=65536)
def template_arguments(name: str) -> tuple[str, ...]:
    """The plain template arguments of a kernel (types and numbers, unqualified; nested templates
    and lambdas left out), which tell two instantiations of one function apart where the tools
    spell the rest differently::

        void at::cuda::kernelHistogram1D<int, int, long, 1, 2, -1, (at::cuda::...)0, ...>
            -> (int, int, long, 1, 2, -1, 0)
        void cuda::kernelHistogram1D<long, long, long, 1, 2, (int)-1, 0, bool ...>
            -> (long, long, long, 1, 2, -1, 0)
    """
    plain = name.replace("(anonymous namespace)::", "").replace("<unnamed>::", "")  # Kineto's, ncu's
    key = _QUALIFIER.sub("", kernel_skeleton(plain))
    start = key.find("<")
    if start < 0:
        return ()
    args: list[str] = []
    depth, current = 0, list[str]()
    for ch in key[start + 1:]:
        if ch == "<":
            depth += 1
        elif ch == ">":
            if depth == 0:
                args.append("".join(current))
                break
            depth -= 1
        elif ch == "," and depth == 0:
            args.append("".join(current))
            current = []
            continue
        if depth == 0 and ch != ">":
            current.append(ch)
    booleans = {"false": "0", "true": "1"}  # one tool prints a bool argument as a number
    return tuple(booleans.get(a, a) for a in args if _SIMPLE_ARG.fullmatch(a))


@lru_cache(maxsize=65536)
def clean_op_name(name: str) -> str:
    """``aten.addmm`` / ``aten::addmm.default`` / NVTX text -> ``aten::addmm``."""
    head = _NVTX_KEY.split(name, maxsplit=1)[0].strip()
    if "::" not in head and head.count(".") >= 1 and _OP_NAME.match(head):
        ns, _, rest = head.partition(".")
        head = f"{ns}::{rest}"
    if "::" in head:
        ns, _, op = head.partition("::")
        op = op.split(".", 1)[0]  # overload name ("default", "Tensor") is not identity
        head = f"{ns}::{op}"
    return head


@lru_cache(maxsize=65536)
def is_operator_name(name: str) -> bool:
    """True for namespaced operator names such as ``aten::mm`` or ``c10d::allreduce_``."""
    return "::" in name and bool(_OP_NAME.match(name.split(",", 1)[0].strip()))


@lru_cache(maxsize=65536)
def is_generated_kernel_name(name: str) -> bool:
    """True for Inductor-generated kernel names (``triton_poi_fused_...``, ``cpp_fused_...``)."""
    return name.startswith(("triton_", "cpp_fused", "cutlass_fused"))


@dataclass(frozen=True, slots=True)
class NvtxOp:
    """An operator range as emit_nvtx wrote it."""

    name: str  # clean
    op_id: int | None
    seq: int | None
    input_shapes: tuple[Any, ...] | None


@lru_cache(maxsize=65536)
def parse_nvtx_op(text: str) -> NvtxOp | None:
    """Split an emit_nvtx range text; None when the text is not an operator range."""
    parts = _NVTX_KEY.split(text)
    head = parts[0].strip()
    if not head or head.startswith("##") or " " in head:
        return None
    values: dict[str, str] = {}
    for i in range(1, len(parts) - 1, 2):
        values[parts[i]] = parts[i + 1].strip().rstrip(",")
    if not (is_operator_name(head) or is_generated_kernel_name(head)):
        return None
    shapes: tuple[Any, ...] | None = None
    if "sizes" in values:
        try:
            frozen = _freeze(ast.literal_eval(values["sizes"]))
        except (ValueError, SyntaxError):
            frozen = None
        # emit_nvtx writes a list of shapes; anything else is not shape information.
        shapes = frozen if isinstance(frozen, tuple) else None
    return NvtxOp(
        name=clean_op_name(head) if "::" in head else head,
        op_id=_int(values.get("op_id")),
        seq=_int(values.get("seq", values.get("Sequence number"))),
        input_shapes=shapes,
    )


def _int(value: str | None) -> int | None:
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def _freeze(value: object) -> object:
    if isinstance(value, list | tuple):
        return tuple(_freeze(v) for v in value)
    return value


def normalize_kernel_name(name: str) -> str:
    """Alias of :func:`kernel_join_key` (the name other stages use)."""
    return kernel_join_key(name)
