"""The cyclic garbage collector paused for passes that allocate millions of acyclic objects.

Spec states, parsed trace lines and history entries hold no reference cycles, so reference
counting frees everything they drop; the cyclic collector only re-walks the live heap each time
enough objects were allocated, which took a quarter of the explorer's time and over half of a
history check's at 1e6 lines. Forked explorer workers inherit the pause.
"""

from __future__ import annotations

import contextlib
import functools
import gc
from collections.abc import Callable, Iterator
from typing import ParamSpec, TypeVar

P = ParamSpec("P")
T = TypeVar("T")


@contextlib.contextmanager
def without_gc() -> Iterator[None]:
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            # What the pass allocated and still holds (a parsed trace, a replayed state) would
            # otherwise all sit in the youngest generation, and the first collections after
            # this would walk every object of it: seconds at a million lines. It is acyclic,
            # so it is moved out of the collector's sight instead (reference counting still
            # frees it).
            gc.freeze()
            gc.enable()


def gc_paused(fn: Callable[P, T]) -> Callable[P, T]:
    """`fn` run with the collector paused (see the module docstring)."""

    @functools.wraps(fn)
    def paused(*args: P.args, **kwargs: P.kwargs) -> T:
        with without_gc():
            return fn(*args, **kwargs)

    return paused
