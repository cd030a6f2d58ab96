"""The ranking steps' registry: a step's name (what ``[ranking] steps`` lists) -> the
factory that builds it for one pipeline. This module imports nothing else of memkit, so the
config's check (memkit.config.model) can read the names without importing the steps.

A step of your own joins with ``@register_step("name")`` on a factory taking the pipeline
(a class whose constructor takes it will do), in a module imported before the config is
read (``memkit eval --plugin MODULE``, or the ``memkit.plugins`` entry point group)."""

from __future__ import annotations

from typing import Any, Callable

STEPS: dict[str, Callable[[Any], Any]] = {}

# the built-in steps, in the order a config without ``[ranking]`` runs them
BUILT_IN = ("reader", "relevance", "changed_facts", "replies")


def register_step(name: str) -> Callable:
    """Decorator: ``factory(pipeline)`` builds the step ``name``. Registering a second,
    different factory under a name already taken is an error."""

    def add(factory: Callable) -> Callable:
        old = STEPS.get(name)
        if old is not None and (old.__module__, old.__qualname__) != (
            factory.__module__,
            factory.__qualname__,
        ):
            raise ValueError(f"ranking step {name!r} is already registered by {old.__qualname__}")
        STEPS[name] = factory
        return factory

    return add


def default_steps(reader: bool, changed_facts: bool) -> list[str]:
    """The steps of a config that names none (no ``[ranking]``): what each section and key
    turns on, in the order a question meets them. The relevance gate and replies run for
    every config (the gate with no ``[relevance]`` only finds an empty ranking empty)."""
    return [
        *(["reader"] if reader else []),
        "relevance",
        *(["changed_facts"] if changed_facts else []),
        "replies",
    ]


def known_steps() -> list[str]:
    """Every name a config may list: the built-in ones, then those registered."""
    import memkit.ranking  # noqa: F401  (fills STEPS with the built-in steps)

    return [*BUILT_IN, *sorted(set(STEPS) - set(BUILT_IN))]
