"""lw.torch.op: lanewise programs as PyTorch operators, against pure-PyTorch twins.

Each op is a ``torch.library`` operator whose CPU kernel runs the lanewise
program on the tensors' memory; these tests check the numbers (eager,
``torch.compile(fullgraph=True)``, ``torch.autograd`` and ``torch.func.vmap``
against a PyTorch twin of the lane, finite differences for a data-dependent
loop), the operator's registrations (``torch.library.opcheck``), that nothing
is copied (data pointers), and the errors.

Every op compiles Numba kernels (and its derivatives more), so the ops are
module-level fixtures shared by the tests; ``torch.compile`` mostly uses the
``aot_eager`` backend (the fake kernel, autograd and functionalisation, without
a C++ build per graph), and one test the default inductor backend.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import pytest
from optional import requires_torch

torch = requires_torch()

import lanewise as lw  # noqa: E402
from lanewise.torch import library  # noqa: E402


def scaled(x, a):
    return a * math.sin(x) + 0.5 * x * x, x > a


def scaled_twin(x, a):
    return a * torch.sin(x) + 0.5 * x * x, x > a


class Pair(NamedTuple):
    first: float
    rest: tuple


def nested(x):
    return Pair(x + 1.0, (x * 2.0, x > 0.0))


def bump(x, y, w):
    return math.exp(-w * (x * x + y * y)) * math.cos(x - 2.0 * y)


def bump_twin(x, y, w):
    x, y = x[:, None], y[None, :]
    return torch.exp(-w * (x * x + y * y)) * torch.cos(x - 2.0 * y)


def decay(x, rate):
    """A while loop with a data-dependent trip count."""
    n = 0
    while x > 1.0:
        x = x * rate
        n += 1
    return x + 0.1 * n * rate


def decay_twin(x, rate, steps=64):
    n = torch.zeros_like(x)
    for _ in range(steps):
        active = x > 1.0
        x = torch.where(active, x * rate, x)
        n = n + active
    return x + 0.1 * n * rate


def escape(cr, ci):
    zr = zi = 0.0
    for n in range(40):
        zr, zi = zr * zr - zi * zi + cr, 2 * zr * zi + ci
        if zr * zr + zi * zi > 4.0:
            return n
    return 40


def escape_twin(cr, ci):
    zr, zi = torch.zeros_like(cr), torch.zeros_like(ci)
    n = torch.full(cr.shape, 40, dtype=torch.int64)
    done = torch.zeros(cr.shape, dtype=torch.bool)
    for k in range(40):
        zr, zi = zr * zr - zi * zi + cr, 2 * zr * zi + ci
        out = (zr * zr + zi * zi > 4.0) & ~done
        n = torch.where(out, k, n)
        done = done | out
    return n


@pytest.fixture(scope="module")
def scaled_op():
    return lw.torch.op(lw.vmap(scaled, in_axes=(0, None)))


@pytest.fixture(scope="module")
def bump_op():
    return lw.torch.op(lw.vmap(lw.vmap(bump, in_axes=(None, 0, None)), in_axes=(0, None, None)))


@pytest.fixture(scope="module")
def decay_op():
    return lw.torch.op(lw.vmap(decay, in_axes=(0, None)))


@pytest.fixture(scope="module")
def escape_op():
    return lw.torch.op(lw.vmap(escape))


def _x(n=7, dtype=torch.float64, grad=False):
    return torch.linspace(-1.3, 2.1, n, dtype=dtype).requires_grad_(grad)


def close(a, b, **kw):
    torch.testing.assert_close(a, b, **kw)


# ---------------------------------------------------------------------------- eager


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_eager_matches_twin(scaled_op, dtype):
    x, a = _x(dtype=dtype), torch.tensor(0.7, dtype=dtype)
    got = scaled_op(x, a)
    assert type(got) is tuple and got[0].dtype == dtype and got[1].dtype == torch.bool
    close(got, scaled_twin(x, a))


def test_results_keep_the_lanes_structure():
    op = lw.torch.op(lw.vmap(nested))
    x = _x()
    want = Pair(x + 1.0, (x * 2.0, x > 0.0))
    got = op(x)
    assert type(got) is Pair and type(got.rest) is tuple
    close(got, want)
    compiled = _counted(lambda x: op(x))[0](x)
    assert type(compiled) is Pair
    close(compiled, want)


def test_python_scalar_argument(scaled_op):
    x = _x()
    close(scaled_op(x, 0.5)[0], scaled_twin(x, torch.tensor(0.5, dtype=torch.float64))[0])


def test_nested_levels_and_strided_inputs(bump_op):
    x, y = torch.linspace(-1, 1, 12, dtype=torch.float64)[::2], torch.linspace(-2, 1, 5, dtype=torch.float64)
    close(bump_op(x, y, 0.3), bump_twin(x, y, 0.3))


def test_integer_results_match_masked_loop(escape_op):
    cr, ci = torch.meshgrid(torch.linspace(-2, 0.6, 9, dtype=torch.float64),
                            torch.linspace(-1.2, 1.2, 7, dtype=torch.float64), indexing="ij")
    got = escape_op(cr.reshape(-1), ci.reshape(-1))
    assert got.dtype == torch.int64
    close(got, escape_twin(cr.reshape(-1), ci.reshape(-1)))


# ---------------------------------------------------------------------------- torch.compile


def _counted(fn, backend="aot_eager", **kw):
    from torch._dynamo.testing import CompileCounterWithBackend

    counter = CompileCounterWithBackend(backend)
    return torch.compile(fn, backend=counter, fullgraph=True, **kw), counter


def test_compile_fullgraph_one_graph_dynamic_sizes(scaled_op):
    def f(x, a):
        out = scaled_op(torch.cos(x), a)
        return out[0] * 2 + out[1]

    compiled, counter = _counted(f, dynamic=True)
    a = torch.tensor(0.3, dtype=torch.float64)
    counts = []
    for n in (5, 9, 13):
        x = _x(n)
        close(compiled(x, a), f(x, a))
        counts.append(counter.frame_count)
    assert counts[0] == counts[-1]  # no recompiles for new sizes: the op's sizes stay symbolic


def test_compile_inductor(escape_op):
    def f(cr, ci):
        return escape_op(cr, ci) * 2 + 1

    compiled, counter = _counted(f, backend="inductor")
    cr = torch.linspace(-2, 0.5, 50, dtype=torch.float64)
    close(compiled(cr, cr * 0.3), escape_twin(cr, cr * 0.3) * 2 + 1)
    assert counter.frame_count == 1


# ---------------------------------------------------------------------------- autograd


def _grads(fn, *args):
    diff = [a for a in args if isinstance(a, torch.Tensor) and a.requires_grad]
    return torch.autograd.grad(fn(*args), diff)


@pytest.mark.parametrize("compiled", [False, True])
def test_grad_per_lane_and_shared_parameter(scaled_op, compiled):
    def loss(op):
        def f(x, a):
            out = op(x, a)
            return (out[0] * torch.arange(1.0, 8.0, dtype=x.dtype)).sum()
        return f

    f = _counted(loss(scaled_op))[0] if compiled else loss(scaled_op)
    x, a = _x(grad=True), torch.tensor(0.7, dtype=torch.float64, requires_grad=True)
    close(_grads(f, x, a), _grads(loss(scaled_twin), x, a))


def test_compiled_backward_dynamic_sizes(scaled_op):
    def loss(op):
        return lambda x, a: (op(x, a)[0] ** 2).sum()

    compiled, counter = _counted(loss(scaled_op), dynamic=True)
    a = torch.tensor(0.7, dtype=torch.float64, requires_grad=True)
    counts = []
    for n in (5, 11):
        x = _x(n, grad=True)
        close(_grads(compiled, x, a), _grads(loss(scaled_twin), x, a))
        counts.append(counter.frame_count)
    assert counts[0] == counts[-1]


def test_grad_two_levels(bump_op):
    def loss(op):
        return lambda x, y, w: (op(x, y, w) ** 2).sum()

    x = torch.linspace(-1, 1, 4, dtype=torch.float64, requires_grad=True)
    y = torch.linspace(-0.5, 1.5, 3, dtype=torch.float64, requires_grad=True)
    w = torch.tensor(0.4, dtype=torch.float64, requires_grad=True)
    close(_grads(loss(bump_op), x, y, w), _grads(loss(bump_twin), x, y, w))
    close(_grads(_counted(loss(bump_op))[0], x, y, w), _grads(loss(bump_twin), x, y, w))


def test_grad_through_data_dependent_while_loop(decay_op):
    x = torch.tensor([1.5, 3.7, 12.0, 40.3, 0.5], dtype=torch.float64, requires_grad=True)
    rate = torch.tensor(0.7, dtype=torch.float64, requires_grad=True)
    weights = torch.tensor([1.0, -2.0, 0.5, 3.0, 1.0], dtype=torch.float64)

    def loss(op):
        return lambda x, rate: (op(x, rate) * weights).sum()

    gx, grate = _grads(loss(decay_op), x, rate)
    close((gx, grate), _grads(loss(decay_twin), x, rate))
    eps = 1e-6
    with torch.no_grad():
        fd = [(loss(decay_op)(x + eps * e, rate) - loss(decay_op)(x - eps * e, rate)) / (2 * eps)
              for e in torch.eye(5, dtype=torch.float64)]
        fd_rate = (loss(decay_op)(x, rate + eps) - loss(decay_op)(x, rate - eps)) / (2 * eps)
    close(gx, torch.stack(fd), rtol=1e-6, atol=1e-6)
    close(grate, fd_rate, rtol=1e-6, atol=1e-6)


def test_integer_argument_gets_no_gradient(decay_op):
    x, rate = _x(grad=True), torch.tensor(0)  # an integer rate: lanes above 1 drop to 0 at once
    (g,) = torch.autograd.grad(decay_op(x, rate).sum(), x)
    (want,) = torch.autograd.grad(decay_twin(x, rate).sum(), x)
    close(g, want)
    assert g.tolist() == [1.0 if v <= 1.0 else 0.0 for v in x.tolist()]


# ---------------------------------------------------------------------------- torch.func.vmap


def test_func_vmap_adds_a_level(scaled_op):
    xs = torch.stack([_x(), _x() * 0.5, _x() + 1.0])
    a = torch.tensor(0.2, dtype=torch.float64)
    got = torch.func.vmap(lambda x: scaled_op(x, a)[0])(xs)
    close(got, scaled_twin(xs, a)[0])
    got = torch.func.vmap(scaled_op, in_dims=(1, None))(xs, a)
    close(got[0], scaled_twin(xs.T, a)[0])
    per_a = torch.func.vmap(scaled_op, in_dims=(None, 0))(_x(), torch.tensor([0.1, 0.2], dtype=torch.float64))
    close(per_a[0][1], scaled_twin(_x(), torch.tensor(0.2, dtype=torch.float64))[0])


def test_batched_backward_jacobian(scaled_op):
    """``is_grads_batched``: the backward under vmap, i.e. the vmap rules of the cotangent
    programs (per-lane arguments, and the shared parameter's summed one)."""
    x, a = _x(5, grad=True), torch.tensor(0.7, dtype=torch.float64, requires_grad=True)

    def jac(op):
        return torch.autograd.grad(op(x, a)[0], (x, a), torch.eye(5, dtype=torch.float64), is_grads_batched=True)

    close(jac(scaled_op), jac(scaled_twin))


def test_second_derivatives_double_backward(bump_op):
    """The cotangent programs are operators with autograd too (the shared parameter's
    summed one included): create_graph=True, then a second backward."""
    x = torch.linspace(-1, 1, 4, dtype=torch.float64, requires_grad=True)
    y = torch.linspace(-0.5, 1.5, 3, dtype=torch.float64, requires_grad=True)
    w = torch.tensor(0.4, dtype=torch.float64, requires_grad=True)

    def second(op):
        first = torch.autograd.grad((op(x, y, w) ** 2).sum(), (x, y, w), create_graph=True)
        return torch.autograd.grad(sum((g * g).sum() for g in first), (x, y, w))

    close(second(bump_op), second(bump_twin))


# Every path: fused sum and mean over all lanes, PyTorch's rule over the values for partial
# sums, max and prod, no derivative for argmax; min shares max's path.
REDUCTIONS = [("sum", None), ("mean", None), ("mean", 1), ("max", None), ("prod", 1), ("argmax", None), ("sum", 0)]


def _torch_fold(name, values, axis):
    if name == "argmax":
        return torch.argmax(values) if axis is None else torch.argmax(values, dim=axis)
    if name == "prod":
        return torch.prod(values) if axis is None else torch.prod(values, dim=axis)
    fold = {"sum": torch.sum, "mean": torch.mean, "min": torch.amin, "max": torch.amax}[name]
    return fold(values) if axis is None else fold(values, dim=axis)


@pytest.mark.parametrize("name, axis", REDUCTIONS)
def test_reduce_programs_are_operators(name, axis):
    """A lw.reduce operator in eager mode, in a compiled graph, under torch.func.vmap
    (the batch level kept by the fused reduction) and under autograd, against PyTorch."""
    op = lw.torch.op(lw.reduce(lw.vmap(lw.vmap(bump, in_axes=(None, 0, None)), in_axes=(0, None, None)), name,
                               axis=axis))

    def twin(x, y, w):
        return _torch_fold(name, bump_twin(x, y, w), axis)

    x = torch.linspace(-1, 1, 5, dtype=torch.float64, requires_grad=True)
    y = torch.linspace(-0.5, 1.5, 4, dtype=torch.float64, requires_grad=True)
    w = torch.tensor(0.4, dtype=torch.float64, requires_grad=True)
    got, want = op(x, y, w), twin(x, y, w)
    assert got.dtype == want.dtype and got.shape == want.shape
    close(got, want)
    close(_counted(lambda x, y, w: op(x, y, w) * 1)[0](x, y, w), want * 1)
    rows = torch.stack([x.detach(), 0.5 * x.detach()])
    close(torch.func.vmap(op, in_dims=(0, None, None))(rows, y.detach(), w.detach()),
          torch.stack([twin(r, y.detach(), w.detach()) for r in rows]))
    if name == "argmax":
        return

    def loss(f):
        return lambda x, y, w: torch.sin(f(x, y, w)).sum()

    close(_grads(loss(op), x, y, w), _grads(loss(twin), x, y, w))


def test_reduce_operator_errors():
    segmented = lw.reduce(lw.vmap(lambda x: (0, x)), "sum", segments=2)
    with pytest.raises(lw.LanewiseError, match="segmented and lw.Monoid reductions are not operators"):
        lw.torch.op(segmented)


@pytest.mark.xfail(raises=RuntimeError, strict=False,
                   reason="torch.library.register_autograd ops under torch.func.grad: PyTorch issue #170834")
def test_func_grad(decay_op):
    rate = torch.tensor(0.6, dtype=torch.float64)
    x = torch.tensor([1.5, 3.7, 12.0], dtype=torch.float64)
    close(torch.func.grad(lambda x: decay_op(x, rate).sum())(x),
          torch.func.grad(lambda x: decay_twin(x, rate).sum())(x))


# ---------------------------------------------------------------------------- the operator


def test_opcheck(scaled_op):
    x, a = _x(5, grad=True), torch.tensor(0.7, dtype=torch.float64, requires_grad=True)
    scaled_op(x, a)
    op = scaled_op._lw_ops[2]
    overload, _ = library.resolve(op, [x, a])
    assert overload.namespace == "lanewise"
    torch.library.opcheck(overload, (x, a))


def test_zero_copy_inputs_and_outputs():
    seen = {}

    class Spy(lw.Mapped):
        def __call__(self, *args, **kwargs):
            seen["args"] = args
            seen["result"] = super().__call__(*args, **kwargs)
            return seen["result"]

    op = lw.torch.op(Spy(lambda x, y: x * y, 0, 0, None, None))
    base = torch.arange(12.0, dtype=torch.float64)
    x, y = base[::3], base[1::3]  # strided views: a copy would be contiguous
    out = op(x, y)
    close(out, x * y)
    for arr, t in zip(seen["args"], (x, y), strict=True):
        assert arr.__array_interface__["data"][0] == t.data_ptr() and arr.strides == (24,)
    assert seen["result"].__array_interface__["data"][0] == out.data_ptr()


# ---------------------------------------------------------------------------- errors


def test_unsupported_dtype_names_the_argument(scaled_op):
    with pytest.raises(lw.LaneTypeError, match=r"argument 0 \('x'\) has dtype torch.float16"):
        scaled_op(_x().half(), 0.5)
    with pytest.raises(Exception, match=r"argument 0 \('x'\) has dtype torch.bfloat16"):
        _counted(lambda x: scaled_op(x.bfloat16(), 0.5))[0](_x())


def test_keyword_arguments_refused(scaled_op):
    with pytest.raises(TypeError, match=r"positional arguments only.*\['a'\]"):
        scaled_op(_x(), a=0.5)


def test_argument_errors_name_the_argument(scaled_op):
    with pytest.raises(lw.LaneTypeError, match=r"argument 1 \('a'\) is a complex tensor that requires grad"):
        scaled_op(_x(), torch.tensor(0.5 + 1j, requires_grad=True))
    with pytest.raises(TypeError, match=r"argument 0 \('x'\) is a list"):
        scaled_op([1.0, 2.0], 0.5)
    with pytest.raises(lw.LanewiseError, match=r"argument 0 \('x'\) is on meta"):
        scaled_op(torch.empty(3, device="meta"), 0.5)
    with pytest.raises(RuntimeError, match="floating point"):  # torch itself: integers never require grad
        torch.arange(3).requires_grad_()


def test_not_a_program():
    with pytest.raises(TypeError, match="lw.vmap"):
        lw.torch.op(lambda x: x)
