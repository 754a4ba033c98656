"""Issue 42, round 3: every transform accepts what ``lw.vmap`` accepts, on every
supported Python (lane/source.py: the lane's node is found from its code object).

References: the analytic derivative (NumPy), ``backend="python"`` and JAX.
"""

from __future__ import annotations

import __future__
import ast
import linecache
import os
import subprocess
import sys
import textwrap
import types

import jax
import numpy as np
import pytest

import lanewise as lw
from lanewise.lane.source import definition

BACKENDS = ["python", "cpu"]
X = np.linspace(-2.0, 2.0, 33)


def _f(x):
    return x * x * np.sin(x)


def _df(x):
    return 2 * x * np.sin(x) + x * x * np.cos(x)


def _run_python(args, **kwargs) -> str:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in [_src(), os.environ.get("PYTHONPATH")] if p))
    done = subprocess.run([sys.executable, *args], capture_output=True, text=True, env=env, timeout=300, **kwargs)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def _src() -> str:
    return os.path.dirname(os.path.dirname(lw.__file__))


# ---------------------------------------------------------------------------- 3.13: np.sin's PUSH_NULL


@pytest.mark.parametrize("backend", BACKENDS)
def test_grad_of_a_numpy_calling_def_in_a_file_on_every_python(backend):
    """Python 3.13 compiles ``np.sin(x)`` of a ``def`` alone with one more PUSH_NULL than
    in its module: the old check re-compiled the ``def`` and refused ``lw.grad``."""
    got = lw.vmap(lw.grad(_f), backend=backend)(X)
    np.testing.assert_allclose(got, _df(X), rtol=1e-13, atol=1e-15)
    assert isinstance(definition(_f), ast.FunctionDef)


def test_lanes_calling_numpy_keep_the_spmd_path():
    """On 3.13 such lanes silently fell back to the scalar path (no source for the SPMD
    transformation): the SPMD path names its vector width."""
    def lane(x):
        k = 0
        while k < 3 and np.sin(x) > -2.0:
            x = x * 0.5 + np.cos(x)
            k += 1
        return x

    xs = np.linspace(0.0, 1.0, 257)
    text = str(lw.explain(lw.vmap(lane), xs))
    assert "lanes per vector step" in text, text
    np.testing.assert_allclose(lw.vmap(lane)(xs), lw.vmap(lane, backend="python")(xs), rtol=1e-15)


# ---------------------------------------------------------------------------- lambdas, located exactly


@pytest.mark.parametrize("backend", BACKENDS)
def test_transforms_accept_lambdas_in_a_for_header(backend):
    grads = []
    for g, k in [(lambda x: x * x * 2.0, 2.0), (lambda x: x * x * 3.0, 3.0)]:
        grads.append((lw.vmap(lw.grad(g), backend=backend)(X), 2 * k * X))
    for got, want in grads:
        np.testing.assert_allclose(got, want, rtol=1e-15)


@pytest.mark.parametrize("backend", BACKENDS)
def test_transforms_accept_lambdas_sharing_a_line_with_the_same_parameters(backend):
    cube, sine = lambda x: x * x * x, lambda x: np.sin(x) * x
    np.testing.assert_allclose(lw.vmap(lw.grad(sine), backend=backend)(X),
                               np.asarray(jax.vmap(jax.grad(lambda x: jax.numpy.sin(x) * x))(X)), rtol=1e-14)
    np.testing.assert_allclose(lw.vmap(lw.grad(cube), backend=backend)(X), 3 * X * X, rtol=1e-15)


def test_nested_lambdas_and_decorated_defs_are_located():
    outer = (lambda a: (lambda y: y * a))  # noqa: E731 - the inner lambda shares the outer's line
    inner = outer(3.0)
    assert ast.unparse(definition(inner)) == "lambda y: y * a"
    assert ast.unparse(definition(outer)).startswith("lambda a:")
    assert lw.grad(inner)(1.5) == 3.0

    @lw.custom_jvp
    def decorated(x):
        return x * 4.0

    node = definition(decorated)
    assert node.name == "decorated" and node.lineno == 2  # counted from the decorator, as co_firstlineno
    assert lw.grad(lambda x: decorated(x) * x)(1.0) == 8.0


# ---------------------------------------------------------------------------- where the text comes from

_PROGRAM = textwrap.dedent("""
    import numpy as np, lanewise as lw
    def f(x):
        return x * x * np.sin(x)
    xs = np.linspace(-2.0, 2.0, 9)
    print(repr(lw.vmap(lw.grad(f))(xs).tolist()))
    print(repr(lw.vmap(lw.grad(lambda x: x ** 3), backend="python")(xs).tolist()))
""")


def _check_program_output(out: str) -> None:
    first, second = (np.array(eval(line)) for line in out.strip().splitlines()[-2:])  # noqa: S307 - our own lists
    xs = np.linspace(-2.0, 2.0, 9)
    np.testing.assert_allclose(first, _df(xs), rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(second, 3 * xs * xs, rtol=1e-15)


def test_transforms_accept_functions_from_python_c():
    _check_program_output(_run_python(["-c", _PROGRAM]))


def test_transforms_accept_a_script_redirected_into_stdin(tmp_path):
    script = tmp_path / "script.py"
    script.write_text(_PROGRAM)
    with open(script) as stdin:
        _check_program_output(_run_python(["-"], stdin=stdin))


@pytest.mark.parametrize("backend", BACKENDS)
def test_transforms_accept_cells_registered_with_linecache(backend):
    """IPython and Jupyter register each cell's text with linecache under its own name."""
    cell = "import numpy as np\ndef cell_lane(x, y):\n    return np.exp(x) * y - x / y\n"
    name = "<ipython-input-42-round3>"
    linecache.cache[name] = (len(cell), None, cell.splitlines(True), name)
    namespace: dict = {}
    exec(compile(cell, name, "exec"), namespace)  # noqa: S102 - what IPython does with a cell
    ys = X * X + 1.0
    gx, gy = lw.vmap(lw.grad(namespace["cell_lane"], argnums=(0, 1)), backend=backend)(X, ys)
    np.testing.assert_allclose(gx, np.exp(X) * ys - 1.0 / ys, rtol=1e-14)
    np.testing.assert_allclose(gy, np.exp(X) + X / ys ** 2, rtol=1e-14)


def test_code_compiled_with_inherited_future_flags_is_found():
    """Code compiled by a module with ``from __future__ import annotations`` carries the
    flag (lanewise's own generated lanes do): compiled without it, the text never
    matched, and ``lw.hessian`` (a transform of a generated lane) failed on 3.13."""
    text = "def flagged(x):\n    return x * x * x\n"
    name = "<round3 future flags>"
    linecache.cache[name] = (len(text), None, text.splitlines(True), name)
    namespace: dict = {}
    exec(compile(text, name, "exec", flags=__future__.annotations.compiler_flag, dont_inherit=True), namespace)  # noqa: S102
    assert definition(namespace["flagged"]) is not None
    assert lw.hessian(lambda x: x ** 4)(2.0) == 48.0
    assert lw.hessian(namespace["flagged"])(2.0) == 12.0


def test_a_file_edited_since_import_is_never_taken_for_the_lane(tmp_path, monkeypatch):
    module = tmp_path / "edited_lane_module.py"
    module.write_text("def lane(x):\n    return x * x\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import edited_lane_module

    assert lw.grad(edited_lane_module.lane)(3.0) == 6.0
    module.write_text("def lane(x):\n    return x * x * x\n")  # same lines, other code
    os.utime(module, (1, 1))  # another mtime: linecache reads it anew
    assert definition(edited_lane_module.lane) is None
    del sys.modules["edited_lane_module"]


_SOURCELESS = textwrap.dedent("""
    import math
    def nowhere(x, n):
        s = 0.0
        for k in range(n):
            if x > k:
                s += math.sin(x) * k
            else:
                s -= x * x
        a, b = s, x
        a, b = b, a
        return a * b
    def over_a_tuple(x):
        t = 0.0
        for v in (x, 2.0 * x):
            t += v
        return t
""")


@pytest.mark.parametrize("backend", BACKENDS)
def test_transforms_of_code_with_no_source_use_its_bytecode(backend):
    """Code exec'd from a string (or piped into python) keeps no text: lw.vmap compiled
    it, lw.grad refused it; now both read the bytecode."""
    namespace: dict = {}
    exec(compile(_SOURCELESS, "<string>", "exec"), namespace)  # noqa: S102
    assert definition(namespace["nowhere"]) is None
    n = np.arange(33) % 5
    got = lw.vmap(lw.grad(namespace["nowhere"]), backend=backend)(X, n)
    ks = np.arange(5)[None, :]
    above, inside = X[:, None] > ks, ks < n[:, None]
    s = np.where(inside, np.where(above, np.sin(X)[:, None] * ks, -X[:, None] ** 2), 0.0).sum(axis=1)
    ds = np.where(inside, np.where(above, np.cos(X)[:, None] * ks, -2 * X[:, None]), 0.0).sum(axis=1)
    np.testing.assert_allclose(got, s + X * ds, rtol=1e-13, atol=1e-14)
    np.testing.assert_allclose(lw.vmap(namespace["nowhere"], backend=backend)(X, n), X * s, rtol=1e-13, atol=1e-14)


def test_code_with_no_source_written_back_keeps_in_place_updates():
    """``a += x`` updates an array in place, so every other name for it sees the change;
    the def rebuilt from bytecode wrote ``a = a + x`` (a new array), and ``b`` kept zeros."""
    from lanewise.lane.fromcode import function_def
    text = ("def shared(x):\n    a = np.zeros(3)\n    b = a\n    a += x\n    v = a[1:]\n    v *= x\n"
            "    s = 1.0\n    t = s\n    s += x\n    return b.sum() + s + t\n")
    namespace: dict = {"np": np}
    exec(compile(text, "<string>", "exec"), namespace)  # noqa: S102
    rebuilt = function_def(namespace["shared"])
    assert any(isinstance(n, ast.AugAssign) for n in ast.walk(rebuilt))
    again: dict = {"np": np}
    exec(compile(ast.unparse(rebuilt), "<rebuilt>", "exec"), again)  # noqa: S102
    for x in (0.5, 2.0, -3.0):
        assert again[rebuilt.name](x) == namespace["shared"](x) == x + 2 * x * x + 1.0 + x + 1.0


def test_code_with_no_source_that_cannot_be_written_back_is_refused_naming_it():
    namespace: dict = {}
    exec(compile(_SOURCELESS, "<string>", "exec"), namespace)  # noqa: S102
    with pytest.raises(lw.LaneCompileError, match=r"lw.grad: over_a_tuple \(<string>:15\) has no source text.*"
                                                  r"other than range"):
        lw.grad(namespace["over_a_tuple"])


def test_jacfwd_of_code_with_no_source_keeps_a_returned_tuples_structure():
    """The tuple a lane returns reaches the return through Numba's temporaries; written
    back, the return holds the tuple again, so lw.jacfwd sees several outputs (the
    lambda of docs/autodiff.md's first block, piped into python, was refused)."""
    namespace: dict = {}
    exec(compile("pair = lambda x, y: (x * y, (x + y, x))\n", "<string>", "exec"), namespace)  # noqa: S102
    pair = namespace["pair"]
    assert definition(pair) is None
    assert lw.jacfwd(pair, argnums=(0, 1))(2.0, 3.0) == ((3.0, 2.0), ((1.0, 1.0), (1.0, 0.0)))
    got = lw.vmap(lw.jacfwd(pair, argnums=(0, 1)))(X, X[::-1])
    want = jax.vmap(jax.jacfwd(lambda x, y: (x * y, (x + y, x)), argnums=(0, 1)))(X, X[::-1])
    assert jax.tree.structure(got) == jax.tree.structure(want)
    for g, w in zip(jax.tree.leaves(got), jax.tree.leaves(want), strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-15)
    # a tuple whose item's variable is assigned again before the return keeps the old value
    exec(compile("def kept(x, y):\n    t = (x, y)\n    x = 2.0 * y\n    return t\n", "<string>", "exec"),  # noqa: S102
         namespace)
    assert lw.jacfwd(namespace["kept"], argnums=(0, 1))(2.0, 3.0) == ((1.0, 0.0), (0.0, 1.0))


def test_statements_typed_at_the_interactive_interpreter_are_found_in_its_history(monkeypatch):
    """Python < 3.13's REPL compiles each statement alone as ``<stdin>`` and keeps no
    text; readline keeps the lines (the README's lw.grad example, pasted)."""
    typed = ["import numpy as np", "@staticmethod", "def typed(x):", "    if x > 0:", "        return x * np.sin(x)",
             "    else:", "        return -x", "", "y = 1"]
    history = types.SimpleNamespace(get_current_history_length=lambda: len(typed),
                                    get_history_item=lambda k: typed[k - 1])
    monkeypatch.setitem(sys.modules, "readline", history)
    namespace: dict = {"np": np}
    exec(compile("\n".join(typed[1:8]) + "\n", "<stdin>", "single"), namespace)  # noqa: S102 - as the REPL does
    lane = namespace["typed"].__func__
    assert isinstance(definition(lane), ast.FunctionDef)
    np.testing.assert_allclose(lw.vmap(lw.grad(lane))(X), np.where(X > 0, np.sin(X) + X * np.cos(X), -1.0),
                               rtol=1e-14)


def test_the_readme_grad_example_pasted_into_the_interactive_interpreter():
    pty = pytest.importorskip("pty")
    lines = ["import numpy as np, lanewise as lw", "def f(x):", "    return x * x * np.sin(x)", "",
             "print('RESULT', repr(lw.grad(f)(0.5)))", "exit()"]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in [_src(), os.environ.get("PYTHONPATH")] if p),
               PYTHON_BASIC_REPL="1")  # 3.13: the classic REPL (its new one keeps text in linecache)
    terminal, child_side = pty.openpty()
    with subprocess.Popen([sys.executable, "-q", "-i"], stdin=child_side, stdout=child_side, stderr=child_side,
                          env=env, start_new_session=True) as interpreter:
        os.close(child_side)
        try:
            out = _talk(terminal, lines)
        finally:
            os.close(terminal)
            interpreter.kill()
    assert f"RESULT {float(_df(0.5))!r}" in out, out[-2000:]


def _talk(fd: int, lines: list[str], timeout: float = 240.0) -> str:
    """Type ``lines`` into the terminal ``fd`` (each once the prompt is back) and return what it printed."""
    import select
    import time

    out, deadline = b"", time.monotonic() + timeout
    pending = list(lines)
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.2)
        if ready:
            try:
                chunk = os.read(fd, 65536)
            except OSError:  # the interpreter exited
                break
            if not chunk:
                break
            out += chunk
        elif pending and out.rstrip().endswith((b">>>", b"...")):
            os.write(fd, (pending.pop(0) + "\r").encode())
    return out.decode(errors="replace")
