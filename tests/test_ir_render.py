"""The lane IR rendered back to Python (lanewise.lane.ir.render) behaves as the code it came from.

For every corpus lane and every real-world kernel (with its helpers): the rendered
functions, run as plain Python on the same inputs, give bit-identical results (and
leave the arguments as the original leaves them), and rendering is a fixed point
(the rendered function's IR renders to the same text).  Precedence is checked on
random expressions against Python's own evaluation of the source.
"""

from __future__ import annotations

import copy
import dataclasses
import importlib
import linecache
import math
import types

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from benchmarks.realworld import modules
from corpus import CORPUS, P, ema_step, examples, fib, lane_values, ping
from corpus import axpy, poly3, ntlane  # noqa: I001 - the corpus' lanes outside CORPUS
from lanewise.errors import LaneCompileError
from lanewise.lane.ir import nodes as ir
from lanewise.lane.ir.build import build, build_with_functions
from lanewise.lane.ir.render import load, load_function, python_name, render, render_module

# ----------------------------------------------------------------------------- comparing runs


def _same(got, want, where="result"):
    """Equal to the bit: the same types, dtypes, shapes and bytes (NaN positions and signed zeros)."""
    assert type(got) is type(want), (where, type(got), type(want))
    if isinstance(want, np.ndarray):
        assert (got.dtype, got.shape) == (want.dtype, want.shape), where
        assert got.tobytes() == want.tobytes(), where
    elif isinstance(want, (tuple, list)):
        assert len(got) == len(want), where
        for k, (g, w) in enumerate(zip(got, want, strict=True)):
            _same(g, w, f"{where}[{k}]")
    elif isinstance(want, (float, complex, np.generic)):
        assert np.asarray(got).tobytes() == np.asarray(want).tobytes(), (where, got, want)
    else:
        assert got == want, (where, got, want)


def _outcome(fn, args):
    """What calling ``fn`` on a copy of ``args`` does: its result and the arguments after, or its error."""
    args = copy.deepcopy(args)
    try:
        with np.errstate(all="ignore"):
            return "returned", fn(*args), args
    except Exception as err:  # noqa: BLE001 - the same error is the expected behaviour
        return "raised", type(err), str(err)


def _check_runs(original, rendered, calls):
    assert calls
    for args in calls:
        want, got = _outcome(original, args), _outcome(rendered, args)
        assert got[0] == want[0], (args, got, want)
        if want[0] == "raised":
            assert got[1:] == want[1:]
        else:
            _same(got[1], want[1])
            _same(got[2], want[2], "arguments after the call")


def _check_fixed_point(lane, helpers=True):
    """The rendered lane's IR (its helpers' included) renders to the same text."""
    module = build(lane)
    rendered = load(lane, helpers)
    again = build(rendered[module.entry.name])
    assert [f.name for f in again.functions()] == [f.name for f in module.functions()]
    if helpers:
        assert render_module(again) == render_module(module)
    else:
        assert render(again.entry) == render(module.entry) and again.helpers == module.helpers
    return rendered[module.entry.name]


# ----------------------------------------------------------------------------- the corpus


def _scalar_inputs(entry, rng, count=6):
    """Argument tuples for a corpus entry: NumPy scalars and rows of each of its dtypes, Python scalars."""
    calls = []
    for dtype in entry.dtypes:
        for k in range(count):
            args = []
            for kind in entry.kinds:
                if kind == "k":
                    args.append(int(rng.integers(*entry.static)))
                elif kind == "r":
                    args.append(lane_values(rng, (int(rng.integers(0, 6)),), dtype, entry.domain))
                else:
                    value = lane_values(rng, (), dtype, entry.domain)[()]
                    args.append(value.item() if k % 2 else value)  # a Python scalar every other time
            calls.append(tuple(args))
    return calls


@pytest.mark.parametrize("entry", CORPUS, ids=lambda e: e.name)
def test_every_corpus_lane_renders_to_code_that_behaves_the_same(entry):
    rendered = _check_fixed_point(entry.lane)
    _check_runs(entry.lane, rendered, _scalar_inputs(entry, np.random.default_rng(43)))


_OTHER_LANES = {
    "axpy": (axpy, [(2.0, 1.5, -1.0), (np.float32(3), np.float32(-2), np.float32(0.5)), (2, 3, 4)]),
    "poly3": (poly3, [(1.0, 2.0, 3.0), (np.int16(7), np.int16(-3), np.int16(2)), (0.5, -0.0, np.nan)]),
    "ntlane": (ntlane, [(P(2.0, 3.0),), (P(np.float32(1.5), np.float32(-4)),)]),
    "fib": (fib, [(n,) for n in range(8)]),
    "ping": (ping, [(n,) for n in range(6)]),
    "ema_step": (ema_step, [((100.0, 100.0, 0.0, 0.0, 100.0), 101.5), ((99.0, 101.0, 1.0, 2.0, 99.5), 98.0),
                            ((100.0, 100.0, -1.0, 0.0, 100.0), 100.0)]),
}


@pytest.mark.parametrize("name", sorted(_OTHER_LANES))
def test_the_corpus_lanes_outside_the_table_render_too(name):
    lane, calls = _OTHER_LANES[name]
    rendered = _check_fixed_point(lane)
    _check_runs(lane, rendered, calls)


@pytest.mark.parametrize("twin", [e.twin for e in CORPUS if e.twin is not e.lane], ids=lambda f: f.__name__)
def test_the_jax_twins_render_to_a_fixed_point(twin):
    """Nested defs, lax calls and keyword arguments; their helpers are JAX's own (``del``
    and all): the twin alone is rendered, calling them."""
    _check_fixed_point(twin, helpers=False)


# ----------------------------------------------------------------------------- the real-world kernels


class _Recorder:
    """A stand-in for ``lanewise`` in a kernel's ``lanewise(lw)``: ``vmap`` runs nothing,
    it records the arguments a few lanes (first, middle, last) would get."""

    def __init__(self):
        self.calls: list = []

    def vmap(self, fn, in_axes=0, out_axes=0):
        def mapped(*args):
            self._lanes(fn, in_axes, args)

        mapped.inner = True
        return mapped

    def reduce(self, mapped, *args, **kwargs):
        return mapped

    def _lanes(self, fn, in_axes, args):
        axes = in_axes if isinstance(in_axes, (tuple, list)) else (in_axes,) * len(args)
        n = next(np.shape(a)[ax] for a, ax in zip(args, axes, strict=True) if ax is not None)
        for i in sorted({0, n // 2, n - 1}):
            lane = tuple(a if ax is None else np.take(a, i, axis=ax) for a, ax in zip(args, axes, strict=True))
            if getattr(fn, "inner", False):
                fn(*lane)  # an inner vmap's stand-in
            else:
                self.calls.append((fn, lane))


def _realworld():
    return [pytest.param(m, id=m.__name__.rsplit(".", 1)[-1]) for m in modules()]


@pytest.mark.parametrize("kernel", _realworld())
def test_every_realworld_kernel_and_its_helpers_render_to_code_that_behaves_the_same(kernel):
    recorder = _Recorder()
    kernel.lanewise(recorder)(*kernel.setup(kernel.SIZES["tiny"]))
    assert recorder.calls
    mapped = {fn for fn, _ in recorder.calls}
    for lane in mapped:
        rendered = _check_fixed_point(lane)
        _check_runs(lane, rendered, [args for fn, args in recorder.calls if fn is lane])
    for helper in set(getattr(kernel, "lanes", ())) - mapped:  # run above, as the mapped lane's helpers
        _check_fixed_point(helper)


@pytest.mark.parametrize("name", ["corpus", "conformance", "many_lanes", "lanewise.lanemath",
                                  "lanewise.random._lanes", "lanewise.random._core"])
def test_every_function_of_lane_modules_renders_to_a_fixed_point_or_is_refused(name):
    """Whatever those modules define (JAX's internals reached as helpers included): a fixed
    point, or a refusal naming the construct the IR does not model.  lanewise's own lanes
    are rendered alone: their helpers are Numba dispatchers, which the front end follows
    as helpers only as dispatchers (a rendered helper is a plain function)."""
    module = importlib.import_module(name)
    functions = [getattr(obj, "py_func", obj) for obj in vars(module).values()]
    functions = [f for f in functions if isinstance(f, types.FunctionType) and f.__module__ == module.__name__]
    helpers = not name.startswith("lanewise")
    rendered = 0
    for fn in functions:
        built = build(fn)
        unsupported = [n for f in (built.functions() if helpers else (built.entry,)) for n in _nodes(f)
                       if isinstance(n, ir.Unsupported)]
        if unsupported:
            with pytest.raises(LaneCompileError, match="cannot be rendered from the lane IR"):
                load(fn, helpers)
        else:
            _check_fixed_point(fn, helpers)
            rendered += 1
    assert rendered


def _nodes(fn):
    todo = [fn.body]
    while todo:
        n = todo.pop()
        if isinstance(n, (tuple, list)):
            todo.extend(n)
        elif dataclasses.is_dataclass(n) and not isinstance(n, ir.Loc):
            yield n
            todo.extend(getattr(n, f.name) for f in dataclasses.fields(n))


# ----------------------------------------------------------------------------- Python's forms, kept


def _cell(text: str, name: str) -> dict:
    """``text`` run as a notebook cell (registered with linecache, as IPython does): lanes
    with ``assert`` cannot live in a test module (pytest rewrites its asserts)."""
    linecache.cache[name] = (len(text), None, text.splitlines(True), name)
    namespace: dict = {}
    exec(compile(text, name, "exec"), namespace)  # noqa: S102 - what IPython does with a cell
    return namespace


_FORMS = '''\
import math
import numpy as numpy_by_another_name
from math import sqrt as root

HITS = []


def hit(i):
    HITS.append(i)
    return i


def for_else(row, t):
    for i in range(row.shape[0]):
        if row[i] > t:
            break
    else:
        return -1
    k = 0
    while k < 3:
        k += 1
        if row.shape[0] == 0:
            break
    else:
        k = 10 * k
    return i + k


def try_forms(x):
    out = []
    try:
        try:
            out.append(1 / x)
        except ZeroDivisionError as err:
            out.append(str(err))
            raise ValueError("zero") from err
        else:
            out.append("else")
        finally:
            out.append("finally")
    except ValueError as err:
        out.append(repr(err.__cause__))
    assert x != 3, f"three: {x!r:>6} {{literal}} 'quoted'"
    return out


def walrus_and_chains(xs):
    hits = [y for x in xs if (y := x * 2) > 2]
    middle = 0 < hit(len(xs)) < 5
    a = b = numpy_by_another_name.zeros(2)
    a += 1.0
    return hits, y, middle, b, a is b, HITS[-1:]


def augmented(arr, i):
    alias = arr
    alias += 1
    arr[hit(i)] += 10
    arr[1:3] *= 2
    ns = type("NS", (), {})()
    ns.v = 1
    ns.v -= 5
    return arr, alias is arr, ns.v


def unpacking(t):
    a, (b, *c), d = t[0], t[1:4], t[-1]
    first, *rest = t
    *init, last = t
    return a, b, c, d, first, rest, init, last, [*t, *rest], (*init,), {**{"k": a}, "j": b}, {*c}


def scoping(n):
    x = -1
    squares = [x * x for x in range(n)]
    pairs = {x: y for x in range(n) for y in range(x) if y % 2 == 0 if x > y}
    gen = sum(x for x in range(n))
    return x, squares, pairs, gen


def precedence(a, b, c):
    return (a - (b - c), -a ** 2, (-a) ** 2, not a == b, a if b else c if a else b,
            a < b < c, (a < b) < c, 2 ** -1, a ** b ** 2, (a ** b) ** 2, ~a & b | c ^ 1, a // b % c if c and b else 0)


def defaults(x, *rest, scale=2.0, **extra):
    def inner(y, k=3):
        return y * k + x
    f = lambda v, w=scale: v * w  # noqa: E731
    return inner(x), f(x), rest, sorted(extra.items()), root(abs(x)), math.pi


def posonly(a, b=2, /, c=3, **kw):
    return a, b, c, sorted(kw.items())


def slices(row):
    return row[:2], row[1:], row[::-1], row[1:-1:2], row[None, :2], row[...]
'''

_FORM_CALLS = {
    "for_else": [(np.arange(5.0), 2.5), (np.arange(5.0), 9.0), (np.zeros(0), 1.0)],
    "try_forms": [(2.0,), (0.0,), (3,), (4,)],
    "walrus_and_chains": [([0, 1, 2, 3],), ([5],), (list(range(7)),)],
    "augmented": [(np.arange(4.0), 0), (np.arange(4), 3)],
    "unpacking": [(tuple(range(6)),), ((1.5, 2, 3, 4, 5),)],
    "scoping": [(0,), (4,)],
    "precedence": [(1, 2, 3), (3, 2, 1), (0, 1, 0), (2, 0, 5), (-1, 2, 2)],
    "defaults": [(2.0,), (-3.0, 1, 2), (1.5,)],
    "slices": [(np.arange(6.0),)],
    "posonly": [(1,), (1, 4), (1, 4, 5)],
}


@pytest.mark.parametrize("name", sorted(_FORM_CALLS))
def test_python_forms_are_kept(name):
    lane = _cell(_FORMS, "<render forms>")[name]
    rendered = _check_fixed_point(lane)
    _check_runs(lane, rendered, _FORM_CALLS[name])


def test_extra_calls_of_keyword_parameters_behave_the_same():
    lane = _cell(_FORMS, "<render forms>")["defaults"]
    rendered = load(lane)["defaults"]
    assert rendered(1.0, 4, scale=3.0, z=1, a=2) == lane(1.0, 4, scale=3.0, z=1, a=2)


def test_positional_only_parameters_stay_positional_only():
    lane = _cell(_FORMS, "<render forms>")["posonly"]
    assert render(build(lane).entry).startswith("def posonly(a, b=2, /, c=3, **kw):")
    rendered = load(lane)["posonly"]
    assert rendered(1, a=5, b=6) == lane(1, a=5, b=6) == (1, 2, 3, [("a", 5), ("b", 6)])
    only = _cell("def only(a, /):\n    return a\n", "<render only>")["only"]
    assert render(build(only).entry) == "def only(a, /):\n    return a\n"
    with pytest.raises(TypeError):
        load(only)["only"](a=1)


def test_augmented_assignments_stay_in_place_and_evaluate_the_index_once():
    namespace = _cell(_FORMS, "<render augmented>")
    text = render(build(namespace["augmented"]).entry)
    assert "    alias += 1\n" in text and "    arr[hit(i)] += 10\n" in text and "    ns.v -= 5\n" in text
    arr, before = np.arange(4.0), len(namespace["HITS"])
    out, same, _ = load(namespace["augmented"])["augmented"](arr, 2)
    assert same and out is arr and arr.tolist() == [1.0, 4.0, 26.0, 4.0]
    assert len(namespace["HITS"]) == before + 1


def test_chained_assignment_evaluates_its_value_once():
    namespace = _cell(_FORMS, "<render chains>")
    assert "    a = b = np.zeros(2)\n" in render(build(namespace["walrus_and_chains"]).entry)


@pytest.mark.parametrize("source, text", [
    ("a - (b - c)", "a - (b - c)"), ("(a - b) - c", "(a - b) - c"), ("-a ** 2", "-(a ** 2)"),
    ("(-a) ** 2", "(-a) ** 2"), ("not a == b", "not (a == b)"), ("a ** b ** c", "a ** (b ** c)"),
    ("a if b else c if d else e", "a if b else (c if d else e)"), ("a < b < c", "a < b < c"),
    ("(a < b) < c", "(a < b) < c"), ("a and b or c", "(a and b) or c"), ("a and (b or c)", "a and (b or c)"),
    ("(lambda: a)()", "(lambda: a)()"), ("(1).real + a", "(1).real + a"), ("-1 + a", "(-1) + a"),
])
def test_precedence_by_parentheses(source, text):
    lane = _cell(f"def lane(a, b, c, d, e):\n    return {source}\n", f"<render {source}>")["lane"]
    assert render(build(lane).entry) == f"def lane(a, b, c, d, e):\n    return {text}\n"


_BINOPS = ["+", "-", "*", "//", "%", "|", "&", "^"]


@st.composite
def _expressions(draw, depth=4):
    """The text of a random, fully parenthesised expression of a..e over small integers."""
    if depth == 0 or draw(st.integers(0, 3)) == 0:
        return draw(st.sampled_from(["a", "b", "c", "d", "e", "0", "1", "2", "True"]))
    sub = _expressions(depth=depth - 1)
    kind = draw(st.sampled_from(["bin", "pow", "shift", "unary", "compare", "bool", "not", "ifexp"]))
    left, right = draw(sub), draw(sub)
    if kind == "bin":
        return f"({left} {draw(st.sampled_from(_BINOPS))} {right})"
    if kind == "pow":
        return f"({left} ** {draw(st.sampled_from(['0', '1', '2', '-1']))})"
    if kind == "shift":
        return f"({left} {draw(st.sampled_from(['<<', '>>']))} {draw(st.sampled_from(['1', '2']))})"
    if kind == "unary":
        return f"({draw(st.sampled_from(['-', '+', '~']))}{left})"
    if kind == "compare":
        ops = draw(st.lists(st.sampled_from(["<", "<=", "==", "!=", ">"]), min_size=1, max_size=3))
        return "(" + left + "".join(f" {op} {draw(sub)}" for op in ops) + ")"
    if kind == "bool":
        return f"({left} {draw(st.sampled_from(['and', 'or']))} {right})"
    if kind == "not":
        return f"(not {left})"
    return f"({left} if {draw(sub)} else {right})"


@settings(max_examples=examples(60), deadline=None)
@given(_expressions(), st.lists(st.integers(-3, 3), min_size=5, max_size=5))
def test_random_expressions_evaluate_as_written(source, values):
    name = f"<render expression {abs(hash(source))}>"
    lane = _cell(f"def lane(a, b, c, d, e):\n    return {source}\n", name)["lane"]
    rendered = _check_fixed_point(lane)
    _check_runs(lane, rendered, [tuple(values), tuple(reversed(values)), (0, 1, 2, -1, -2)])


@st.composite
def _programs(draw, depth=2, loops=0):
    """Lines of a random block over a..e: assignments, augmented ones, if/else, bounded
    for and while loops with break/continue, try/except (``//`` and ``%`` may divide by zero)."""
    lines = []
    for _ in range(draw(st.integers(1, 3))):
        kinds = ["assign", "aug", "if", "for", "while", "try", "exit"] if depth else ["assign", "aug"]
        kind = draw(st.sampled_from(kinds))
        var = draw(st.sampled_from("abcde"))
        value = draw(_expressions(depth=2)).replace("**", "+").replace("<<", "|").replace(">>", "&")
        inner = _programs(depth=depth - 1, loops=loops + (kind in ("for", "while")))
        if kind == "assign":
            lines.append(f"{var} = {value}")
        elif kind == "aug":
            lines.append(f"{var} {draw(st.sampled_from(['+', '-', '^', '|', '&', '//', '%']))}= {value}")
        elif kind == "if":
            lines += [f"if {value}:", *("    " + x for x in draw(inner)), "else:", *("    " + x for x in draw(inner))]
        elif kind == "for":
            lines += [f"for i{depth} in range({draw(st.integers(0, 3))}):", *("    " + x for x in draw(inner))]
            lines += ["else:", f"    {var} = {var} + 1"] if draw(st.booleans()) else []
        elif kind == "while":
            lines += [f"w{depth} = 0", f"while ({value}) and w{depth} < 3:", f"    w{depth} += 1",
                      *("    " + x for x in draw(inner))]
        elif kind == "try":
            lines += ["try:", *("    " + x for x in draw(inner)), "except ZeroDivisionError:", f"    {var} = -7"]
        else:
            lines.append(draw(st.sampled_from(["break", "continue"])) if loops else f"return {value}")
    return lines


@settings(max_examples=examples(40), deadline=None)
@given(_programs(), st.lists(st.integers(-3, 3), min_size=5, max_size=5))
def test_random_programs_run_as_written(lines, values):
    text = "def lane(a, b, c, d, e):\n" + "".join(f"    {x}\n" for x in lines) + "    return a, b, c, d, e\n"
    lane = _cell(text, f"<render program {abs(hash(text))}>")["lane"]
    rendered = _check_fixed_point(lane)
    _check_runs(lane, rendered, [tuple(values), tuple(reversed(values)), (0, 1, 2, -1, -2)])


# ----------------------------------------------------------------------------- names, constants, refusals


@pytest.mark.parametrize("value", [0.0, -0.0, 1.5, -2.25, math.inf, -math.inf, 1e308, 5e-324, -5e-324, 3, -7,
                                   True, None, "a'b\"c\n", b"\x00z", 2j, -2j, complex(-0.0, 1.0),
                                   complex(1.0, math.inf), (1, -2.0, (None,)), ()])
def test_constants_render_to_their_exact_value(value):
    loc = ir.Loc("f.py", 1, 0)
    fn = ir.Function("f", (), (ir.Exit("return", ir.Const(value), loc),), loc)
    namespace: dict = {}
    exec(render(fn), namespace)  # noqa: S102 - the rendered text
    got = namespace["f"]()
    assert type(got) is type(value) and repr(got) == repr(value)
    if isinstance(value, (float, complex)):
        assert np.asarray(got).tobytes() == np.asarray(value).tobytes()


def test_nan_renders_to_a_nan():
    loc = ir.Loc("f.py", 1, 0)
    fn = ir.Function("f", (), (ir.Exit("return", ir.Const(math.nan), loc),), loc)
    namespace: dict = {}
    exec(render(fn), namespace)  # noqa: S102
    assert math.isnan(namespace["f"]())


def test_helper_names_that_are_not_python_names():
    assert python_name("lane") == "lane"
    made = {python_name(n) for n in ("make.<locals>.f", "f#2", "<lambda>", "<lambda>#2", "class")}
    assert len(made) == 5 and all(n.isidentifier() and n.startswith("_lw_") for n in made)


def test_a_module_path_is_rendered_by_its_short_name_and_bound_when_run():
    namespace = _cell("import numpy\ndef lane(x):\n    return numpy.exp(x) + numpy.pi\n", "<render module path>")
    assert render(build(namespace["lane"]).entry) == "def lane(x):\n    return np.exp(x) + np.pi\n"
    assert "np" not in namespace
    assert load(namespace["lane"])["lane"](1.0) == namespace["lane"](1.0)


def test_a_local_named_as_a_module_path_is_refused():
    namespace = _cell("from math import sqrt\ndef lane(x):\n    math = x\n    return sqrt(math)\n",
                      "<render shadowed>")
    with pytest.raises(LaneCompileError, match=r"<render shadowed>:4\) cannot be rendered.*'math'"):
        render(build(namespace["lane"]).entry)


def test_a_construct_the_ir_does_not_model_is_refused_with_its_line():
    def lane(x):
        with open(x) as f:
            y = f
        return y

    line = lane.__code__.co_firstlineno + 1
    with pytest.raises(LaneCompileError, match=rf"test_ir_render.py:{line}\) .*a with statement"):
        render(build(lane).entry)


def test_an_inplace_operator_that_updates_something_else_is_refused():
    loc = ir.Loc("f.py", 3, 0)
    bad = ir.Assign(ir.Var("y"), ir.Prim("add", (ir.Var("x"), ir.Const(1)), loc, params=(("inplace", True),)), loc)
    fn = ir.Function("f", (ir.Param("x"),), (bad, ir.Exit("return", ir.Var("y"), loc)), loc)
    with pytest.raises(LaneCompileError, match=r"f.py:3\) .*in-place add"):
        render(fn)


def test_a_closure_helper_is_called_by_its_name_and_runs_rendered():
    lane = next(e.lane for e in CORPUS if e.name == "closure")
    module, originals = build_with_functions(lane)
    assert "return (_sq(x) * scale) + shift" in render(module.entry)
    rendered = load(lane)
    assert rendered["_sq"] is not originals["_sq"]
    assert rendered[module.entry.name].__closure__ is not None
    cells = dict(zip(rendered[module.entry.name].__code__.co_freevars, rendered[module.entry.name].__closure__,
                     strict=True))
    assert cells["_sq"].cell_contents is rendered["_sq"]


def test_a_rendered_lane_compiles_through_lanewise_and_agrees():
    """The text is a lane like any other: lanewise compiles it (closure helpers and all)."""
    import lanewise as lw

    lane = next(e.lane for e in CORPUS if e.name == "closure")
    rendered = load(lane)[build(lane).entry.name]
    x = np.linspace(-2.0, 2.0, 9)
    _same(lw.vmap(rendered)(x), lw.vmap(lane)(x))


_BUILTINS = '''\
def builtin_calls(x, row):
    return (row[slice(2)], row[slice(1, None)], pow(x, 2), pow(int(x), 3, 5), tuple(row), list((x, x)),
            format(x, ">8.3f"), f"{format(x, '.1f')!r:>{int(x) + 8}} {x!s} {'q'}", dict(a=x), set(row[:1]))
'''


def test_calls_of_builtins_named_as_primitives_keep_their_meaning():
    """``slice(2)``, ``pow(a, b, m)``, ``tuple(x)``, ``format(x, s)``: calls, not the syntax
    whose primitive has the same name (a slice ``x[:2]``, ``**``, a display, an f-string field)."""
    lane = _cell(_BUILTINS, "<render builtins>")["builtin_calls"]
    rendered = _check_fixed_point(lane)
    _check_runs(lane, rendered, [(2.5, np.arange(4.0)), (-1.0, np.arange(3))])


def test_a_rewritten_function_is_loaded_as_the_original_code():
    """What a rewrite pass does: change nodes, render, run in the lane's namespace (its
    closure values and helpers as the original has them)."""
    lane = next(e.lane for e in CORPUS if e.name == "closure")  # inner(x) * scale + shift
    module, functions = build_with_functions(lane)
    (ret,) = module.entry.body
    product = ret.value.args[0]
    swapped = dataclasses.replace(ret.value, args=(dataclasses.replace(product, op="truediv"), ret.value.args[1]))
    rewritten = load_function(dataclasses.replace(module.entry, body=(dataclasses.replace(ret, value=swapped),)),
                              functions[module.entry.name], functions)
    for x in (-1.5, 0.5, 3.0):
        assert rewritten(x) == (x * x) / 2.5 + -1.0


def _code_lines(code) -> set:
    found = {line for _, _, line in code.co_lines() if line is not None}
    return found.union(*(_code_lines(c) for c in code.co_consts if isinstance(c, types.CodeType)))


def _divides(x, y):
    s = x + 1.0
    if y > 0:
        s = s / 2.0
    t = x / y  # the line a ZeroDivisionError names
    return s + t


@pytest.mark.parametrize("lane", [e.lane for e in CORPUS] + [_divides]
                         + [lane for m in modules() for lane in m.lanes], ids=lambda f: f.__name__)
def test_loaded_at_the_users_lines_the_code_runs_at_them(lane):
    """``lines=True``: the user's file and lines (a statement's own; an expression that
    spans lines is on its statement's first)."""
    module, functions = build_with_functions(lane)
    original = functions[module.entry.name]
    rendered = load_function(module.entry, original, functions, lines=True)
    assert rendered.__code__.co_filename == original.__code__.co_filename
    assert rendered.__code__.co_firstlineno == original.__code__.co_firstlineno
    assert _code_lines(rendered.__code__) <= _code_lines(original.__code__)
    if lane in [e.lane for e in CORPUS]:
        assert _code_lines(rendered.__code__) == _code_lines(original.__code__)


def test_an_error_of_a_lane_loaded_at_the_users_lines_names_the_users_line():
    module, functions = build_with_functions(_divides)
    rendered = load_function(module.entry, _divides, functions, lines=True)
    with pytest.raises(ZeroDivisionError) as got:
        rendered(1.0, 0.0)
    frame = got.traceback[-1]
    assert (str(frame.path), frame.lineno + 1) == (__file__, _divides.__code__.co_firstlineno + 4)
    assert "t = x / y" in str(frame.statement)


def _one_line(x):
    s = x + 1.0; t = s * 2.0  # noqa: E702 - two statements on one line
    for k in range(2):
        t += k
    return t


def test_statements_a_pass_puts_at_one_user_line_run_at_it():
    """``lines=True``: each text line at the line of the user's statement printed on it
    (:func:`~lanewise.lane.ir.linetable.relined`): statements sharing a user line (the
    user's ``a; b``, a pass's several statements at one, a compound one put there too)
    share it in the code, one a line in the text, and the statements below keep theirs."""
    module, functions = build_with_functions(_one_line)
    entry = module.entry
    first = entry.body[0]
    extra = dataclasses.replace(first, target=ir.Var("u"), value=dataclasses.replace(first.value))  # at its line
    loop = dataclasses.replace(entry.body[2], loc=first.loc)  # a compound statement at that line too
    body = (first, extra, entry.body[1], loop, entry.body[3])
    assert render(dataclasses.replace(entry, body=body)).splitlines()[1:5] == [
        "    s = x + 1.0", "    u = x + 1.0", "    t = s * 2.0", "    for k in range(2):"]
    def_line = _one_line.__code__.co_firstlineno
    moved = load_function(dataclasses.replace(entry, body=body), _one_line, functions, lines=True)
    assert _code_lines(moved.__code__) == _code_lines(_one_line.__code__) - {def_line + 2}  # the for's own line
    assert moved(1.0) == _one_line(1.0) == 5.0
    rendered = load_function(entry, _one_line, functions, lines=True)
    assert _code_lines(rendered.__code__) == _code_lines(_one_line.__code__)
    assert rendered(1.0) == _one_line(1.0) == 5.0


_SOURCELESS = '''\
import math
def nowhere(x, n):
    s = 0.0
    for k in range(n):
        if x > k:
            s += math.sin(x) * k
    return s
pair = lambda x, y: (x * y, x + y)
'''


def test_a_function_rebuilt_from_its_bytecode_renders_and_behaves_the_same():
    namespace: dict = {}
    exec(compile(_SOURCELESS, "<string>", "exec"), namespace)  # noqa: S102 - no text kept
    for name, calls in [("nowhere", [(2.5, 4), (0.5, 0), (-1.0, 3)]), ("pair", [(2, 3), (1.5, -2.0)])]:
        assert build(namespace[name]).entry.source == "bytecode"
        rendered = _check_fixed_point(namespace[name])
        assert build(rendered).entry.source == "source"  # the rendered text is read from then on
        _check_runs(namespace[name], rendered, calls)
