"""The registry of retriever kinds: ``type`` name -> class, ``build`` from a typed spec
(``memkit.config.model.RetrieverSpec``) or a config dict, ``load`` of any saved retriever.

This module imports nothing else from ``memkit.retrieval``: it is the bottom of the
package, so every kind's module can import ``build`` and ``register`` at its top (the
hybrid builds its parts, a saved retriever's loader builds it) without an import loop.
A kind joins the registry by decorating its class with ``@register``; the package's
``__init__`` imports every built-in kind, so importing ``memkit.retrieval`` (or any of
its modules) fills the registry.

>>> from memkit.retrieval import build
>>> build({"type": "bm25", "k1": 0.9, "b": 0.4})
BM25Retriever(k1=0.9, b=0.4, ...)
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, TypeVar

from memkit.config.model import typed
from memkit.core.errors import ValidationError

if TYPE_CHECKING:
    from memkit.retrieval.base import Retriever

REGISTRY: dict[str, type["Retriever"]] = {}

R = TypeVar("R", bound=type)


def register(cls: R) -> R:
    """Class decorator: ``cls`` is built for ``{"type": cls.type_name, ...}``. Registering
    a second, different class under a name already taken is an error."""
    name = cls.type_name
    old = REGISTRY.get(name)
    if old is not None and (old.__module__, old.__qualname__) != (
        cls.__module__,
        cls.__qualname__,
    ):
        raise ValueError(f"retriever type {name!r} is already registered by {old.__qualname__}")
    REGISTRY[name] = cls
    return cls


def kind_of(spec: Any) -> type["Retriever"]:
    """The class a typed spec or a config dict names (its ``type``)."""
    if not isinstance(spec, dict):
        spec = {"type": spec.type} if hasattr(spec, "type") else spec
    if not isinstance(spec, dict) or "type" not in spec:
        raise ValidationError("retriever", f"expected a table with a 'type', got {spec!r}")
    kind = spec["type"]
    if kind not in REGISTRY:
        raise ValidationError("retriever.type", f"expected one of {sorted(REGISTRY)}, got {kind!r}")
    return REGISTRY[kind]


def build(spec: Any) -> "Retriever":
    """A retriever from its typed spec, or from a config dict (``{"type": ..., **params}``)
    checked into one first. The constructor gets the settings the spec was written with;
    a kind registered at run time (no spec of its own) has them checked there."""
    spec = typed("retriever", spec)
    return kind_of(spec).from_spec(spec)


def with_settings(spec: Any, **changes: Any) -> Any:
    """A copy of a typed spec or config dict with these settings changed."""
    return {**spec, **changes} if isinstance(spec, dict) else spec.model_copy(update=changes)


def map_specs(spec: Any, fn: Callable[[Any], Any]) -> Any:
    """A copy of a typed spec or config dict with ``fn`` applied to every retriever spec in
    it, a composite's parts (the keys its class names in ``child_params``) before the
    composite. This is how a caller changes settings before anything is built, instead of
    changing built retrievers:
    ``map_specs(spec, lambda s: with_settings(s, url=url) if ... else s)``."""
    parts = {}
    for key in kind_of(spec).child_params:
        part = spec.get(key) if isinstance(spec, dict) else getattr(spec, key)
        if isinstance(part, list):
            parts[key] = [map_specs(p, fn) for p in part]
        elif part is not None:
            parts[key] = map_specs(part, fn)
    return fn(with_settings(spec, **parts))


def load(folder: str | Path) -> "Retriever":
    """Load any saved retriever: the kind its ``retriever.json`` names loads it."""
    spec = json.loads((Path(folder) / "retriever.json").read_text())
    return kind_of(spec).load(folder)
