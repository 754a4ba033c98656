"""The lane IR's memo (lane/ir/build.py): one build per lane while nothing it resolved
changes, a fresh one as soon as a global, closure cell, module attribute or builtin
it resolved is rebound (a stale IR would let a pass judge code that no longer runs)."""

import itertools
import linecache
import math
import types

from lanewise.lane.ir.build import build, function_ir
from lanewise.lane.ir.printer import pretty


def _namespace(text: str, **env) -> dict:
    """A module's globals, run from ``text`` registered with linecache (so the lanes have source)."""
    name = f"<lw-memo-test-{next(_COUNT)}>"
    linecache.cache[name] = (len(text), None, text.splitlines(True), name)
    ns = {"__name__": "lw_memo_test", **env}
    exec(compile(text, name, "exec"), ns)
    return ns


_COUNT = itertools.count()


def test_unchanged_lane_is_built_once():
    def lane(x):
        return math.sqrt(x) + 1.0
    assert build(lane) is build(lane)
    assert function_ir(lane) is function_ir(lane)


def test_rebinding_a_global_helper_rebuilds():
    ns = _namespace("def helper(v):\n    return v + 1\n\ndef lane(x):\n    return helper(x)\n")
    first = build(ns["lane"])
    assert [h.name for h in first.helpers] == ["helper"]
    ns.update(_namespace("def helper(v):\n    return inner(v) * 2\n\ndef inner(v):\n    return v\n"))
    ns["helper"].__globals__["inner"] = ns["inner"]
    second = build(ns["lane"])
    assert second is not first
    assert [h.name for h in second.helpers] == ["helper", "inner"]


def test_a_global_that_shadows_a_builtin_rebuilds():
    ns = _namespace("def lane(x):\n    return abs(x)\n")
    assert function_ir(ns["lane"]).body[0].value.op == "abs"
    ns["abs"] = lambda v: v  # now a Python helper, not the builtin
    assert function_ir(ns["lane"]).body[0].value.op.startswith("call:")


def test_a_closure_cell_change_rebuilds():
    def make():
        f = math.sqrt

        def lane(x):
            return f(x)

        def rebind(g):
            nonlocal f
            f = g
        return lane, rebind
    lane, rebind = make()
    assert function_ir(lane).body[0].value.op == "math.sqrt"
    rebind(math.exp)
    assert function_ir(lane).body[0].value.op == "math.exp"


def test_a_module_attribute_change_rebuilds():
    mod = types.ModuleType("lw_memo_mod")
    mod.step = lambda v: v + 1
    ns = _namespace("def lane(x):\n    return mod.step(x)\n", mod=mod)
    before = pretty(build(ns["lane"]))
    mod.step = math.floor
    after = pretty(build(ns["lane"]))
    assert "call:" in before  # a Python helper, parsed with the lane
    assert "call:" not in after and "lw_memo_mod.step" in after  # a builtin function reached through the module


def test_new_code_object_rebuilds():
    def lane(x):
        return x + 1
    first = function_ir(lane)
    lane.__code__ = (lambda x: x * 2).__code__
    assert function_ir(lane).body[0].value.op == "mul" and first.body[0].value.op == "add"


def test_the_memo_does_not_keep_lanes_alive():
    import gc
    import weakref

    def make():
        def lane(x):
            return lane(x - 1) if x > 0 else x  # reads itself
        return lane
    lane = make()
    build(lane), function_ir(lane)
    gone = weakref.ref(lane)
    del lane
    gc.collect()
    assert gone() is None


def test_a_helper_rebound_to_none_after_it_died_rebuilds():
    import gc
    ns = _namespace("def helper(v):\n    return v\n\ndef lane(x):\n    return helper(x)\n")
    assert build(ns["lane"]).helpers
    ns["helper"] = None  # the helper dies; a dead reference must not read as None
    gc.collect()
    assert not build(ns["lane"]).helpers
