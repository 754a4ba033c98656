"""``backend="auto"``: the tpu backend where a TPU is in use and the call qualifies, else the cpu backend.

A TPU is in use when JAX, already imported, computes on one by default
(:func:`default_is_tpu`), or when an argument is a JAX array on a TPU.  JAX is
never imported here: a process that has not imported it uses no TPU, and a NumPy
user's calls run on the cpu backend exactly as with ``backend="cpu"``.

A call qualifies for the tpu backend when its arguments are 32-bit (a float64 or
int64 argument does not: the chip computes 32-bit numbers) and its lane lowers to a
Pallas kernel: building the tpu executable and tracing its kernel raise no
``LaneCompileError``, ``LaneTypeError`` or ``BackendError``.  The choice is made once
per call signature and kept with the function's executables (never retried on
every call); its reason is what ``lw.explain`` prints as ``backend: ...``.  A
call with ``out=`` or a ``progress=True`` function runs on the cpu backend, which
fills ``out=`` and shows progress.  ``backend="tpu"`` itself never falls back.

Example:
    >>> import numpy as np, lanewise as lw
    >>> f = lw.vmap(lambda x: 2 * x, backend="auto")
    >>> f(np.arange(3.0))  # no TPU in use: the cpu backend, NumPy results
    array([0., 2., 4.])
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

from .. import pytree
from ..errors import BackendError, LaneCompileError, LaneTypeError

#: The name that asks for the automatic choice (``backend="auto"``, ``LANEWISE_BACKEND=auto``).
AUTO = "auto"
#: :func:`state`'s answers: launchers kept under one are dropped under the other.
ON_TPU, OFF_TPU = "auto (tpu)", "auto (cpu)"
#: What makes the tpu backend refuse a call: the call does not qualify.
REFUSALS = (LaneCompileError, LaneTypeError, BackendError)

_default: list = []  # JAX's answer, once it is imported: its default backend is fixed then


def default_is_tpu() -> bool:
    """Whether JAX is imported and its default device is a TPU (never imports JAX).

    Example:
        >>> default_is_tpu() in (True, False)
        True
    """
    if "jax" not in sys.modules:
        return False
    if not _default:
        import jax

        try:
            _default.append(jax.default_backend() == "tpu")
        except RuntimeError:  # no backend initialises: certainly no TPU
            _default.append(False)
    return _default[0]


def state() -> str:
    """:data:`ON_TPU` or :data:`OFF_TPU`: which one a fast-path launcher was made under."""
    return ON_TPU if default_is_tpu() else OFF_TPU


@dataclass(frozen=True)
class Choice:
    """The backend an automatic choice made, and why (``lw.explain``'s ``backend:`` line)."""

    name: str
    why: str

    def line(self) -> str:
        """``lw.explain``'s line: ``backend: cpu (auto: ...)``."""
        return f"backend: {self.name} (auto: {self.why})"


def _jax_array(value) -> bool:
    return type(value).__module__.startswith("jax") and hasattr(value, "devices")


def _on_tpu(args: tuple, kwargs: dict) -> bool:
    """An argument leaf is a JAX array on a TPU."""
    for value in pytree.flatten((args, kwargs))[0]:
        if _jax_array(value):
            try:
                devices = value.devices()
            except TypeError:  # a tracer has none (ConcretizationTypeError): it says nothing of where it runs
                continue
            if any(d.platform == "tpu" for d in devices):
                return True
    return False


def _tpu_in_use(args: tuple, kwargs: dict) -> str | None:
    """Why the TPU is in use for this call, or None."""
    if default_is_tpu():
        return "JAX's default device is a TPU"
    if "jax" in sys.modules and _on_tpu(args, kwargs):
        return "an argument is a JAX array on a TPU"
    return None


def choose(owner, mapped, args: tuple, kwargs: dict, get, out=None):
    """``(backend, call, choice)`` of a call of ``owner`` (an ``lw.vmap`` function or
    ``lw.reduce`` of ``mapped``) under ``backend="auto"``: ``call`` bound for the chosen
    backend (``get``: the registry's backend by name).  The choice is kept in
    ``owner._executables`` per signature."""
    cpu = get("cpu")
    why = _tpu_in_use(args, kwargs)
    if why is None:
        return cpu, cpu.bind_call(mapped, args, kwargs), _no_tpu()
    if out is not None:
        return cpu, cpu.bind_call(mapped, args, kwargs), Choice(
            "cpu", "out= fills the caller's arrays; the tpu backend returns new jax.Arrays")
    if getattr(owner, "progress", False):
        return cpu, cpu.bind_call(mapped, args, kwargs), Choice("cpu", "progress=True runs on the cpu backend")
    tpu = get("tpu")
    call = tpu.bind_call(mapped, args, kwargs)
    key = (AUTO, call.signature)
    choice = owner._executables.get(key)
    if choice is None:
        choice = owner._executables[key] = _qualify(owner, tpu, call, why)
    if choice.name == tpu.NAME:
        return tpu, call, choice
    if any(_jax_array(v) for v in call.values):  # kept on the device for the tpu: the cpu reads host views
        call = cpu.bind_call(mapped, args, kwargs)
    return cpu, call, choice


def _qualify(owner, tpu, call, why: str) -> Choice:
    """Whether ``call``'s signature runs on the tpu backend: its executable built and its
    kernel traced (both kept for the run), or the error that refused it."""
    try:
        tpu.trace(owner.executable(tpu, call), call)
    except REFUSALS as e:
        owner._executables.pop((tpu.NAME, call.signature), None)  # never run: not kept
        return _refused(why, e)
    return _qualified(why)


def choose_typed(args: tuple, qualify) -> Choice:
    """The choice for a call typed without data (``lw.jax.op``'s, at trace time):
    ``qualify()`` types it on the tpu backend, raising one of :data:`REFUSALS` where
    the call does not qualify.  ``args``: the call's leaves (a JAX array on a TPU
    puts the TPU in use).

    Example:
        >>> choose_typed((), lambda: None).name in ("cpu", "tpu")
        True
    """
    why = _tpu_in_use(args, {})
    if why is None:
        return _no_tpu()
    try:
        qualify()
    except REFUSALS as e:
        return _refused(why, e)
    return _qualified(why)


def _no_tpu() -> Choice:
    return Choice("cpu", "JAX's default device is not a TPU" if "jax" in sys.modules else
                  "JAX is not imported: no TPU in use")


def _refused(why: str, error: Exception) -> Choice:
    reason = " ".join(str(error).split())
    return Choice("cpu", f"{why}, but the tpu backend cannot run this call: {reason}")


def _qualified(why: str) -> Choice:
    return Choice("tpu", f"{why}; the call's arguments are 32-bit and its lane lowers to a Pallas kernel")
