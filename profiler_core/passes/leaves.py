"""Every tensor in a model's output, whatever holds it, named by its path.

Real models return more than tensors and tuples: ``transformers`` gives a ``ModelOutput``
(a dataclass that is also an ordered dict) whose cache is an object holding a list of layer
objects, each with ``keys`` and ``values`` tensors. ``output_leaves`` walks such a value and
returns its leaves in a stable order, keyed by a path a person can read::

    CausalLMOutputWithPast(logits=T, past_key_values=DynamicCache(layers=[DynamicLayer(keys=K, values=V)]))
    -> {"logits": T, "past_key_values.layers[0].keys": K, "past_key_values.layers[0].values": V,
        "past_key_values.layers[0].is_initialized": True, ...}

What is walked: tensors (leaves), mappings (``['key']``; attribute style for ``ModelOutput``),
lists and tuples (``[i]``), named tuples and dataclasses (``.field``), and any other object
through its instance attributes (``.name``). Plain data (None, bool, numbers, strings, bytes,
enums, torch dtypes and devices, and tuples/sets of those) are leaves compared by value. An
object that holds no tensor anywhere is skipped: a config, a tokenizer or a callable in the
output is not a mismatch. A value met again on the path being walked (a cycle) is not
walked again.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Iterator, Mapping
from typing import Any

import torch

_PLAIN = (type(None), bool, int, float, complex, str, bytes, enum.Enum, torch.dtype, torch.device,
          torch.Size, torch.memory_format, torch.layout)
MAX_DEPTH = 64  # deeper nesting than any model output; a guard against pathological objects


class Leaves(dict[str, Any]):
    """Path -> leaf value, in walk order; ``output_leaves`` of a Leaves is itself."""


def is_plain(value: Any) -> bool:
    """Whether ``value`` is plain data, compared by value (numbers, strings, enums, dtypes...)."""
    if isinstance(value, _PLAIN):
        return True
    if isinstance(value, tuple | frozenset | set) and not _is_namedtuple(value):
        return all(is_plain(v) for v in value)
    return False


def _is_namedtuple(value: Any) -> bool:
    return isinstance(value, tuple) and hasattr(type(value), "_fields")


def _is_model_output(value: Any) -> bool:
    # transformers.utils.ModelOutput, recognised without importing transformers
    return any(cls.__name__ == "ModelOutput" for cls in type(value).__mro__)


def _join_attr(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _children(value: Any, path: str) -> Iterator[tuple[str, Any]]:
    """(child path, child) of one container or object, in a stable order."""
    if _is_model_output(value) and isinstance(value, Mapping):
        for key, child in value.items():  # only the fields that are set, as ModelOutput itself shows
            yield _join_attr(path, str(key)), child
    elif isinstance(value, Mapping):
        for key, child in value.items():
            yield f"{path}[{key!r}]", child
    elif _is_namedtuple(value):
        for name, child in zip(type(value)._fields, value, strict=True):
            yield _join_attr(path, name), child
    elif isinstance(value, list | tuple):
        for i, child in enumerate(value):
            yield f"{path}[{i}]", child
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for f in dataclasses.fields(value):
            yield _join_attr(path, f.name), getattr(value, f.name, None)
    else:
        attrs = getattr(value, "__dict__", None)
        if isinstance(attrs, dict):
            for name, child in attrs.items():
                if not callable(child) or isinstance(child, torch.Tensor):
                    yield _join_attr(path, name), child


def _walk(value: Any, path: str, on_path: set[int], depth: int, out: dict[str, Any]) -> bool:
    """Add the leaves under ``value`` to ``out``; True if any of them is a tensor."""
    if isinstance(value, torch.Tensor):
        out[path] = value
        return True
    if is_plain(value):
        out[path] = value
        return False
    if depth >= MAX_DEPTH or id(value) in on_path or isinstance(value, type | torch.nn.Module):
        return False
    on_path.add(id(value))
    try:
        found: dict[str, Any] = {}
        has_tensor = False
        for child_path, child in _children(value, path):
            has_tensor |= _walk(child, child_path, on_path, depth + 1, found)
    finally:
        on_path.discard(id(value))
    container = isinstance(value, Mapping | list | tuple) or dataclasses.is_dataclass(value)
    if has_tensor or container:
        out.update(found)  # an object's plain attributes count only beside its tensors
    return has_tensor


def output_leaves(outputs: Any) -> Leaves:
    """Every tensor leaf of ``outputs`` (and the plain data beside them), keyed by path; "" for a bare value."""
    if isinstance(outputs, Leaves):
        return outputs
    out: dict[str, Any] = {}
    _walk(outputs, "", set(), 0, out)
    return Leaves(out)


def snapshot_leaves(outputs: Any) -> Leaves:
    """``output_leaves`` with every tensor detached and copied (CUDA-graph outputs are overwritten next run)."""
    return Leaves({path: v.detach().clone() if isinstance(v, torch.Tensor) else v
                   for path, v in output_leaves(outputs).items()})
