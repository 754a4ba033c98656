"""lanewise programs inside ``torch.compile`` (``lw.torch.op``) against the same program in PyTorch.

Two rows, the bars of the bridge issue (docs/jax.md, section PyTorch):

* the escape-time fractal (W2: 1500², 500 iterations) as an op inside a
  ``torch.compile``d function, against the pure-PyTorch twin compiled the same
  way: a masked loop over every pixel (``torch.where``), written with
  PyTorch's ``while_loop`` (the counterpart of ``lax.while_loop``; a Python
  ``for`` loop of 500 steps is unrolled by Dynamo and Inductor had not
  finished compiling it for 300² after 17 minutes);
* the W3 backtest (2000 series × 5000 steps, a scan per series) as an op inside
  a ``torch.compile``d function, against its PyTorch twin compiled the same way:
  PyTorch's ``scan`` over time, every series one element of the carried
  tensors (the counterpart of ``jax.vmap(lax.scan)``);
* the per-call cost of a tiny op (8 lanes of ``x + 1``) inside a compiled
  function, against the same compiled function with ``x + 1`` written in
  PyTorch: the difference is what the operator adds.  PyTorch's floor for any
  such operator is timed too (``x + 1`` by torch inside a Python custom op
  registered the same way), and eager calls.

Each compiled function is compiled and checked once, then the tools are timed
in ``--repeats`` interleaved rounds; medians are reported.  ``lanewise-direct``
is the program called on NumPy views outside PyTorch.  The machine's load at
the start is recorded: PyTorch's OpenMP threads slow down badly when another
process holds a core.

    python -m benchmarks.torch_bridge            # documented sizes (writes results/torch_bridge.json)
    python -m benchmarks.torch_bridge --quick    # small sizes, nothing written
"""
from __future__ import annotations

import argparse
import os

import numpy as np

import lanewise as lw

from . import w2_fractal, w3_backtest
from .jax_bridge import compare, loop
from .report import emit_rows


def _twin(torch):
    """W2 in PyTorch: every pixel iterated in lockstep, escaped ones masked."""
    from torch._higher_order_ops import while_loop

    def fractal(cre, cim):
        cr, ci = cre[:, None], cim[None, :]
        zr = torch.zeros(cre.shape[0], cim.shape[0], dtype=cre.dtype)
        res = torch.full(zr.shape, w2_fractal.MAX_ITER, dtype=torch.int64)

        def cond(k, zr, zi, res):
            return k < w2_fractal.MAX_ITER

        def body(k, zr, zi, res):
            zr, zi = zr * zr - zi * zi + cr, 2 * zr * zi + ci
            return k + 1, zr, zi, torch.where((zr * zr + zi * zi > 4.0) & (res == w2_fractal.MAX_ITER), k, res)

        return while_loop(cond, body, (torch.tensor(0), zr, torch.zeros_like(zr), res))[3]
    return fractal


def fractal(torch, n: int, repeats: int) -> dict:
    program = w2_fractal._lanewise(lw)
    grid = lw.torch.op(program)
    twin = _twin(torch)
    tools = {"lanewise-op": torch.compile(lambda re, im: grid(re, im) + 0, fullgraph=True),
             "torch-compile-while_loop": torch.compile(lambda re, im: twin(re, im) + 0, fullgraph=True),
             "lanewise-direct": lambda re, im: program(re.numpy(), im.numpy())}
    re, im = (torch.from_numpy(a) for a in w2_fractal.setup(n))

    def check(a, b, direct):  # Inductor may contract a*b+c into FMA: boundary points move by one step
        assert np.mean(a.numpy() != b.numpy()) <= 1e-4 and np.array_equal(a.numpy(), direct)

    row = compare("fractal", f"{n}x{n}, {w2_fractal.MAX_ITER} iterations", tools, (re, im), repeats, check)
    row["ratio"] = row["median_s"]["lanewise-op"] / row["median_s"]["torch-compile-while_loop"]
    row["bar"] = "<= 0.1x the PyTorch twin in torch.compile"
    return row


def _scan_twin(torch):
    """W3 in PyTorch: one ``scan`` over time, the series side by side in each step."""
    from torch._higher_order_ops.scan import scan

    def step(carry, price):
        fast, slow, pos, pnl, last = carry
        pnl = pnl + pos * (price - last)
        fast = fast + w3_backtest.FAST * (price - fast)
        slow = slow + w3_backtest.SLOW * (price - slow)
        pos = torch.where(fast > slow, 1.0, torch.where(fast < slow, -1.0, pos))
        return (fast, slow, pos, pnl, price.clone()), fast.new_zeros(())  # scan refuses a carry aliasing x

    def backtest(prices):
        p0 = prices[:, 0]
        init = (p0.clone(), p0.clone(), torch.zeros_like(p0), torch.zeros_like(p0), p0.clone())
        return scan(step, init, prices.T.contiguous())[0][3]
    return backtest


def backtest(torch, n: int, repeats: int) -> dict:
    program = w3_backtest._lanewise(lw)
    op = lw.torch.op(program)
    twin = _scan_twin(torch)
    tools = {"lanewise-op": torch.compile(lambda p: op(p) * 1.0, fullgraph=True),
             "torch-compile-scan": torch.compile(lambda p: twin(p) * 1.0, fullgraph=True),
             "lanewise-direct": lambda p: program(p.numpy())}
    (prices,) = w3_backtest.setup(n)

    def check(a, b, direct):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-9, atol=1e-9)
        np.testing.assert_array_equal(a.numpy(), direct)

    row = compare("backtest", f"{n} series x {w3_backtest.STEPS} steps", tools, (torch.from_numpy(prices),),
                   repeats, check)
    row["ratio"] = row["median_s"]["lanewise-op"] / row["median_s"]["torch-compile-scan"]
    row["bar"] = "<= 0.2x the PyTorch scan in torch.compile"
    return row


def _python_op(torch):
    """PyTorch's own floor for such an operator: ``x + 1`` computed by torch inside a
    Python custom op registered as lanewise's are (kernel, fake, autograd)."""
    lib = torch.library.Library("lanewise_bench", "FRAGMENT")
    torch.library.define("lanewise_bench::plus_one", "(Tensor a0) -> Tensor", lib=lib)
    torch.library.impl("lanewise_bench::plus_one", "cpu", lambda x: x + 1.0, lib=lib)
    torch.library.register_fake("lanewise_bench::plus_one", lambda x: torch.empty_like(x), lib=lib)
    torch.library.register_autograd("lanewise_bench::plus_one", lambda ctx, g: g, lib=lib)
    _python_op.lib = lib  # kept alive: dropping the library removes the operator
    return torch.ops.lanewise_bench.plus_one.default


def overhead(torch, repeats: int) -> dict:
    op = lw.torch.op(lw.vmap(lambda x: x + 1.0))
    plus_one = _python_op(torch)
    tools = {"lanewise-op": torch.compile(lambda x: op(x) * 2.0, fullgraph=True),
             "torch": torch.compile(lambda x: (x + 1.0) * 2.0, fullgraph=True),
             "torch-python-custom-op": torch.compile(lambda x: plus_one(x) * 2.0, fullgraph=True),
             "lanewise-op-eager": lambda x: op(x) * 2.0, "torch-eager": lambda x: (x + 1.0) * 2.0}
    x = torch.arange(8.0, dtype=torch.float64)
    want = (x + 1.0) * 2.0
    for f in tools.values():
        torch.testing.assert_close(f(x), want)
    calls = 2000  # per round: one call is ~10-50 µs, below the timer's useful resolution
    # Rounds are cheap here, and a 2-core machine shared with other work is noisy: 4x the rounds.
    row = compare("tiny op", "8 lanes of x + 1", {k: loop(f, calls) for k, f in tools.items()}, (x,),
                   4 * repeats, lambda *outs: None)
    row["median_s"] = {k: v / calls for k, v in row["median_s"].items()}
    row["overhead_us"] = (row["median_s"]["lanewise-op"] - row["median_s"]["torch"]) * 1e6
    row["overhead_eager_us"] = (row["median_s"]["lanewise-op-eager"] - row["median_s"]["torch-eager"]) * 1e6
    row["python_custom_op_overhead_us"] = (row["median_s"]["torch-python-custom-op"] - row["median_s"]["torch"]) * 1e6
    row["bar"] = "<= 20 us per call"
    return row


def main(argv=None) -> None:
    import torch

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes; nothing written")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    load = os.getloadavg()[0]
    rows = [fractal(torch, 300 if args.quick else 1500, args.repeats),
            backtest(torch, w3_backtest.SIZES["quick" if args.quick else "full"], args.repeats),
            overhead(torch, args.repeats)]
    for row in rows:
        row["load_average_at_start"] = round(load, 2)
        row["torch_threads"] = torch.get_num_threads()
    emit_rows("torch_bridge", rows, args.repeats, write=not args.quick)


if __name__ == "__main__":
    main()
