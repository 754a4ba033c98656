"""The W-wide lane compiled once and checked before a kernel links it: Numba must
accept it, and it must neither allocate nor raise anything the host cannot
replay (:func:`check_compiled`).
"""

from __future__ import annotations

import re
import sys
import types
from dataclasses import dataclass

import numpy as np

from .failure import LANE_RAISED
from .plans import Plan
from .rows import OUT_OF_BOUNDS
from .stream import STREAM
from .syntax import Unsupported
from .transform import FUNCTION


@dataclass(frozen=True)
class StreamIO:
    """How the kernel module feeds a streamed W-wide lane: the source of its
    ``_lw_load``/``_lw_store`` (with their imports) and the Numba types of the
    ``_lw_ctx`` tuple it passes, as the caller predicts them."""

    source: str
    context: tuple


def argument_types(plan: Plan, program, call, context: tuple | None = None) -> tuple:
    """Numba types of the W-wide lane's arguments for this call (for ``lane_stream``:
    ``context``, the types of the kernel's ``_lw_ctx``, or a stand-in context of
    1-D arrays, see :func:`check_compiled`)."""
    import numba
    from numba.core import types as nt

    sig = program.signature
    uniform, varying = [], []
    for kind, leaf_index in zip(plan.kinds, plan.leaves):
        if kind in ("default", "row", "table"):  # rows and tables: see below
            continue
        if kind == "tuple":
            uniform += [numba.typeof(call.values[j]) for j in leaf_index]
            continue
        leaf = sig.leaves[leaf_index]
        dtype = numba.from_dtype(leaf.element_dtype)
        if kind == "varying":
            varying.append(nt.Array(dtype, 1, "C"))
        elif leaf.is_array:
            uniform.append(dtype)
        else:
            uniform.append(numba.typeof(call.values[leaf_index]))
    outs = [nt.Array(numba.from_dtype(np.dtype(d)), 1, "C") for _, d in plan.results]
    if plan.stream:
        return (nt.Tuple(list(context) if context is not None else varying + outs), nt.int64, nt.int64, *uniform)
    params = iter(varying)
    args = [nt.Array(nt.boolean, 1, "C")]
    for kind, leaf_index in zip(plan.kinds, plan.leaves):
        if kind == "row":  # data pointers, length, stride (bytes)
            args += [nt.Array(nt.uint64, 1, "C"), nt.int64, nt.int64]
        elif kind == "table":  # one data pointer, length, stride (bytes)
            args += [nt.uint64, nt.int64, nt.int64]
        elif kind == "varying":
            args.append(next(params))
        elif kind == "uniform":
            args.append(uniform.pop(0))
        elif kind == "tuple":
            args += [uniform.pop(0) for _ in leaf_index]
    return (*args, *outs)


def stand_ins(plan: Plan) -> str:
    """``_lw_load``/``_lw_store`` over a context of 1-D arrays (the kernel module's
    own read the lanes' leaves and write the outputs)."""
    nv = sum(k == "varying" for k in plan.kinds)
    values = [f"v{j}" for j in range(len(plan.results))]
    return "\n".join([
        "@numba.njit",
        "def _lw_load(ctx, i):",
        f"    return ({''.join(f'ctx[{k}][i], ' for k in range(nv))})",
        "@numba.njit",
        f"def _lw_store(ctx, i, {', '.join(values)}):",
        *[f"    ctx[{nv + j}][i] = {v}" for j, v in enumerate(values)],
        ""])


_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _numba_reason(error) -> str:
    """The telling lines of a Numba compile error: its first statement and the
    call it could not type, without colour codes and the "During:" trail."""
    lines = [line.strip() for line in _ANSI.sub("", str(error)).splitlines()]
    keep = [line for line in lines if line and not line.startswith(("During:", "Failed in ", "File ", "^"))]
    call = next((line for line in keep if line.startswith(">>>")), "")
    head = next((line for line in keep if not line.startswith(">>>")), str(error))
    return f"{head} {call}".strip()


def check_compiled(plan: Plan, program, call, module: str | None = None, io: StreamIO | None = None):
    """Compile the W-wide lane once and check it cannot raise or allocate; return
    its dispatcher (compiled for this call's argument types).

    With ``module`` (the kernel module's name, disk cache on), the lane is
    compiled as a function of that module, registered under its name until the
    module itself is loaded: the kernel then links this compile instead of
    compiling its own copy, and Numba's disk cache, which records a linked
    function's module by name, finds the kernel module when it reloads.  A
    streamed lane is compiled with the kernel's ``io`` (so calling it from the
    kernel reads and writes what the kernel's own copy would, whatever types it
    is called with), else with stand-ins that only a check may use."""
    home = types.ModuleType(module or "lanewise._spmd_check")
    feed = (io.source if io is not None else stand_ins(plan)) if plan.stream else ""
    source = "import numba\n" + feed + "\n" + plan.source
    exec(compile(source.replace(", cache=True", ""), "<lanewise spmd check>", "exec"), home.__dict__)
    if module is not None and (not plan.stream or io is not None):
        sys.modules.setdefault(module, home)
    dispatcher = home.__dict__[STREAM if plan.stream else FUNCTION]
    argtypes = argument_types(plan, program, call, io.context if io is not None else None)
    try:
        dispatcher.compile(argtypes)
    except Exception as e:  # noqa: BLE001 - any rejection: the lane keeps the scalar path
        raise Unsupported(f"a construct Numba rejects in the W-wide form: {_numba_reason(e)}") from None
    llvm = dispatcher.inspect_llvm(argtypes)
    for body in _numba_functions(llvm):
        # "store ptr null" clears the slot a call to a compiled function (lw.random's
        # twins) reports through: no exception; a callee's exception is propagated
        # with a store of its pointer, which is refused.
        if any(not _is_replayed_error(store, llvm) for store in re.findall(r"store [^\n]*, ptr %excinfo", body)
               if not store.startswith("store ptr null,")):
            raise Unsupported("an operation that may raise inside the W-wide lane")
        if "NRT_MemInfo_alloc" in body or "NRT_Allocate" in body:
            raise Unsupported("an allocation inside the W-wide lane")
    return dispatcher


def _is_replayed_error(store: str, llvm: str) -> bool:
    """Whether an exception store of the W-wide lane raises a row read's bounds
    error (:data:`.rows.OUT_OF_BOUNDS`) or a lane's ``raise``/``assert``
    (:data:`.failure.LANE_RAISED`): the exceptions it may raise, since the host
    replays the failed group's lanes on the scalar path for the exception Python
    raises."""
    buf = re.match(r"store ptr (@\.const\.picklebuf\.\w+), ptr %excinfo", store)
    if buf is None:
        return False
    data = buf.group(1).replace("picklebuf", "pickledata")
    return any(re.search(re.escape(data) + r" = [^\n]*" + re.escape(text), llvm) is not None
               for text in (OUT_OF_BOUNDS, LANE_RAISED))


#: Mangled-name marks of lanewise's own vector math: its rare slow paths (trig
#: arguments beyond 2**30) hold exception branches that no input reaches.
_TRUSTED = ("8lanewise8lanemath",)


def _numba_functions(llvm: str) -> list[str]:
    """Bodies of the functions of a module that follow Numba's calling convention
    (they take ``%excinfo``, where a raised exception would be stored), except
    lanewise's vector math."""
    out = []
    for chunk in llvm.split("\ndefine ")[1:]:
        head, _, body = chunk.partition("\n")
        if "%excinfo" in head and not any(mark in head for mark in _TRUSTED):
            out.append(body.split("\n}\n", 1)[0])
    return out

