"""The command line: ``python -m lanewise COMMAND [options]`` (or ``lanewise COMMAND``).

Commands:
  demo    the classic vectorisation tutorial: Python loops vs NumPy (meshgrid and
          broadcasting) vs a hand-written Numba loop vs JAX (when installed) vs
          lanewise, with time, peak memory, an agreement check and a picture of both.

Example:
    >>> from lanewise.__main__ import build_parser
    >>> build_parser().parse_args(["demo", "--quick"]).quick
    True
"""

from __future__ import annotations

import argparse
import sys

from . import demo
from .version import __version__


def build_parser(prog: str = "lanewise") -> argparse.ArgumentParser:
    """The parser of the ``lanewise`` command and its subcommands.

    Each subcommand sets ``handler``: a function of the parsed arguments
    returning the exit status.

    Example:
        >>> args = build_parser().parse_args(["demo", "--n", "500", "--no-plot"])
        >>> args.command, args.n, args.no_plot
        ('demo', 500, True)
    """
    parser = argparse.ArgumentParser(
        prog=prog,
        description="lanewise: write the computation for one lane in plain Python; "
                    "run it over every lane of your arrays as one compiled loop nest.")
    parser.add_argument("--version", action="version", version=f"lanewise {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    sub = commands.add_parser(
        "demo", help="Python loops vs NumPy vs Numba vs JAX vs lanewise on cos(x²+y²)/(1+x²+y²): "
                     "time, peak memory, agreement, plot",
        description="The classic vectorisation tutorial: f(x, y) = cos(x²+y²)/(1+x²+y²) on "
                    "linspace(-2, 2, n)² by a pure Python double loop (on a small grid, its time "
                    "at n extrapolated), NumPy meshgrid, NumPy broadcasting, a hand-written Numba "
                    "prange loop, jax.vmap under jax.jit (when JAX is installed) and lanewise nested "
                    "vmap.  Each method runs in a fresh process; prints the machine, the threads, "
                    "time and peak memory, checks that the methods agree, and saves a "
                    "picture of the surface next to bars of time and memory per method.")
    demo.add_arguments(sub)
    sub.set_defaults(handler=demo.run)
    return parser


def _prog() -> str:
    return "python -m lanewise" if sys.argv[0].endswith("__main__.py") else "lanewise"


def main(argv: list[str] | None = None) -> int:
    """Run the ``lanewise`` command line with ``argv`` (default: ``sys.argv[1:]``).

    Example:
        >>> main(["demo", "--help"])  # doctest: +SKIP
        usage: lanewise demo [-h] [--n N] [--quick] ...
    """
    args = build_parser(_prog()).parse_args(argv)
    return args.handler(args)


if __name__ == "__main__":
    sys.exit(main())
