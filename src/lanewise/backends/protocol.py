"""The backend protocol: what every backend package provides.

A backend is a module (``lanewise.backends.<name>``) with the members below.
The API layer only ever talks to backends through them, picked by
:func:`lanewise.backends.select`; no code outside the registry
(:mod:`lanewise.backends`) tests a backend's name.

Example:
    >>> from lanewise import backends
    >>> all(conforms(backends.get(n)) for n in ("cpu", "python"))
    True
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable


@runtime_checkable
class Backend(Protocol):
    """The members of a backend module (a ``Protocol``: modules match it structurally)."""

    #: The registry name.
    NAME: str
    #: How ``lw.scan`` runs inside this backend's lanes: "compiled" (the lane's own
    #: compiled loop) or "reference" (the Python loop of lanewise.lane.scanning).
    SCAN: str

    def bind_call(self, mapped: Any, args: tuple, kwargs: dict) -> Any:
        """Validate ``mapped(*args, **kwargs)`` into a :class:`lanewise.plan.program.Call`."""

    def build(self, call: Any) -> Any:
        """The executable of ``call``'s signature (the caller caches it per signature)."""

    def run(self, exe: Any, call: Any, out: Any = None) -> Any:
        """Every lane of ``call``: the output pytree (or ``out``, filled)."""

    def build_reduce(self, op: Any, axis: Any, call: Any) -> Any:
        """The executable of ``lw.reduce(mapped, op, axis)`` for ``call``'s signature."""

    def run_reduce(self, exe: Any, call: Any) -> Any:
        """The reduction of ``call``'s lanes."""

    def explain(self, exe: Any, call: Any) -> list[str]:
        """The schedule lines of :func:`lanewise.explain` for an executable of this backend."""

    def usable(self) -> bool:
        """Whether this backend can run kernels here (a GPU for cuda)."""


MEMBERS = ("NAME", "SCAN", "bind_call", "build", "run", "build_reduce", "run_reduce", "explain", "usable")


def conforms(module) -> bool:
    """Whether ``module`` has every member of :class:`Backend`."""
    return all(hasattr(module, name) for name in MEMBERS)
