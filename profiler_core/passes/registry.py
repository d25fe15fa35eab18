"""The pass registry: a dict plus a decorator, and one door for built-ins and plugins alike.

Built-in passes register exactly as an outside package would::

    from profiler_core.passes import PassContext, PassEffect, PassLevel, register_pass

    @register_pass("my_pass", level=PassLevel.DYNAMO_FX, symptom="what the profile shows")
    def my_pass(ctx: PassContext) -> PassEffect:
        ...

An outside package exposes the module holding such functions under the entry-point group
``operator_profiler.passes`` (in its pyproject: ``[project.entry-points."operator_profiler.passes"]
my_pass = "my_package.passes"``); the registry imports every such module the first time passes
are listed or looked up.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from importlib.metadata import entry_points

from profiler_core.errors import PassError
from profiler_core.passes.contract import PassContext, PassEffect
from profiler_core.plugins import load_plugin_modules
from profiler_core.transformations import normalize_name, register_transformation

ENTRY_POINT_GROUP = "operator_profiler.passes"

PassFunction = Callable[[PassContext], PassEffect]
# None when the pass can apply to the model in ``ctx``, else the reason it cannot (shown to the user).
# Cheap and side-effect free: the optimize loop asks it of the original model before spending a trial.
Applicability = Callable[[PassContext], str | None]


class PassLevel(StrEnum):
    """Where in the torch.compile pipeline a pass acts; passes of different levels compose."""

    DYNAMO_FX = "dynamo_fx"  # Level 1: the Dynamo FX graph (or the module), before AOTAutograd
    POST_GRAD = "post_grad"  # Level 2: the post-grad ATen graph, an Inductor custom pass
    INDUCTOR_CONFIG = "inductor_config"  # Level 3: Inductor / torch.compile configuration

    @property
    def number(self) -> int:
        """1, 2 or 3: the order levels are applied in."""
        return {PassLevel.DYNAMO_FX: 1, PassLevel.POST_GRAD: 2, PassLevel.INDUCTOR_CONFIG: 3}[self]


@dataclass(frozen=True)
class PassSpec:
    """One registered pass: its name, level, the symptom it addresses and its function."""

    name: str
    level: PassLevel
    symptom: str  # what a profile shows when this pass is worth trying
    description: str  # what the pass changes
    function: PassFunction
    order: int = 100  # position within its level; lower runs first
    structural: bool = False  # changes the model's structure (not just its graph)
    source: str = "builtin"  # "builtin", or the entry point that brought it in
    aliases: tuple[str, ...] = ()  # other names findings may use for this transformation
    inference_only: bool = False  # never tried on a model in train mode (freezing, conv-BN folding)
    applicable: Applicability | None = None  # None: assumed applicable (the pass decides when it runs)
    suggests: tuple[str, ...] = ()  # passes worth trying on top once this one is kept (bf16 -> cuda_graphs)
    supersedes: tuple[str, ...] = ()  # passes this one replaces: asked for together, they are NOT APPLIED

    def cannot_apply(self, ctx: PassContext) -> str | None:
        """Why this pass cannot apply to ``ctx``'s model, or None when it may (train mode, then its hook)."""
        if self.inference_only and ctx.training:
            return f"'{self.name}' is for inference and the model is in train mode"
        if self.applicable is None:
            return None
        try:
            return self.applicable(ctx)
        except Exception as err:  # a hook that breaks must not stop a loop; the trial itself will tell
            return f"the applicability check of '{self.name}' raised {type(err).__name__}: {err}"


_REGISTRY: dict[str, PassSpec] = {}
_ALIASES: dict[str, str] = {}
_plugins_loaded = False


def register_pass(
    name: str,
    *,
    level: PassLevel,
    symptom: str,
    description: str | None = None,
    order: int = 100,
    structural: bool = False,
    source: str = "builtin",
    aliases: tuple[str, ...] = (),
    inference_only: bool = False,
    applicable: Applicability | None = None,
    suggests: tuple[str, ...] = (),
    supersedes: tuple[str, ...] = (),
) -> Callable[[PassFunction], PassFunction]:
    """Decorator: register ``fn`` as the pass ``name`` (description defaults to its docstring).

    ``applicable(ctx)``: None when the pass can apply to ``ctx.model``, else the reason it cannot
    (no module of the kind it rewrites, a precision already in place); a pass that cannot apply
    costs an optimize loop no trial. ``suggests``: passes to try on top once this one is kept.
    ``supersedes``: passes this one replaces (the plan drops them; the loop does not try them on top).
    """

    def decorate(fn: PassFunction) -> PassFunction:
        key = normalize_name(name)
        existing = _REGISTRY.get(key)
        if existing is not None and not _same_function(existing.function, fn):
            raise PassError(
                f"pass '{key}' is registered twice ({_where(existing.function)} and {_where(fn)}); "
                "rename one of them"
            )
        doc = (fn.__doc__ or "").strip().splitlines()
        _REGISTRY[key] = PassSpec(
            name=key, level=PassLevel(level), symptom=symptom,
            description=description or (doc[0] if doc else key), function=fn,
            order=order, structural=structural, source=source,
            aliases=tuple(normalize_name(a) for a in aliases), inference_only=inference_only,
            applicable=applicable, suggests=tuple(normalize_name(n) for n in suggests),
            supersedes=tuple(normalize_name(n) for n in supersedes),
        )
        for alias in _REGISTRY[key].aliases:
            _ALIASES[alias] = key
        for licensed in (key, *_REGISTRY[key].aliases):  # a finding may name the pass by any of them
            register_transformation(licensed)
        return fn

    return decorate


def _same_function(a: PassFunction, b: PassFunction) -> bool:
    # A module imported twice (reload, a plugin re-importing a built-in) re-registers the
    # same function under a new object; that is not a clash.
    return _where(a) == _where(b)


def _where(fn: PassFunction) -> str:
    line = getattr(getattr(fn, "__code__", None), "co_firstlineno", "?")
    return f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', repr(fn))}:{line}"


def load_plugins() -> None:
    """Import every module advertised under the ``operator_profiler.passes`` entry-point group."""
    global _plugins_loaded
    if _plugins_loaded:
        return
    _plugins_loaded = True
    load_plugin_modules(entry_points(group=ENTRY_POINT_GROUP), "pass", PassError)


def get_pass(name: str) -> PassSpec:
    """The registered pass called ``name``; PassError naming the known passes otherwise."""
    load_plugins()
    key = normalize_name(name)
    spec = _REGISTRY.get(key) or _REGISTRY.get(_ALIASES.get(key, ""))
    if spec is None:
        known = ", ".join(sorted(_REGISTRY)) or "none"
        raise PassError(f"unknown pass '{name}'; known passes: {known} (see 'oprof passes')")
    return spec


def list_passes() -> list[PassSpec]:
    """Every registered pass, ordered by level, then position within the level, then name."""
    load_plugins()
    return sorted(_REGISTRY.values(), key=lambda s: (s.level.number, s.order, s.name))


def unregister_pass(name: str) -> None:
    """Remove a pass (plugins under test, or a plugin replacing a built-in on purpose)."""
    spec = _REGISTRY.pop(normalize_name(name), None)
    for alias in spec.aliases if spec is not None else ():
        _ALIASES.pop(alias, None)
