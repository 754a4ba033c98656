"""The demo's one picture: the surface, and beside it each method's time and peak memory.

Drawing only.  :mod:`lanewise.demo` measures, formats and words; it hands over
plain numbers and strings, one dict ("bar") per method, in the table's order:

``label``       the method's name, down the bars' axis
``time_s``      its median time per call, in seconds (drawn on a log scale)
``time_text``   the time as written at the bar's end
``peak_mb``     its peak RSS in MB, of which ``base_mb`` is its baseline (imports + inputs)
``peak_text``   the peak as written at the bar's end
``guessed``     True for an extrapolated or estimated figure: its bar is hatched, not filled
``highlight``   True for lanewise: its bars coloured, its name bold

Example:
    >>> import numpy as np
    >>> bars = [dict(label=m, time_s=t, time_text=f"{t} s", peak_mb=p, base_mb=30.0, peak_text=f"{p} MB",
    ...              guessed=m == "loops", highlight=m == "lanewise")
    ...         for m, t, p in [("loops", 40.0, 320.0), ("numpy", 0.5, 900.0), ("lanewise", 0.1, 330.0)]]
    >>> fig = figure(np.eye(4), bars, "a title", "the surface", (-2, 2, -2, 2))
    >>> len(fig.axes)  # the surface, its colour bar, time, memory
    4
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

# Fixed size and resolution: the same layout on every machine, and a PNG of about 200 kB.
FIGSIZE, DPI = (14.0, 5.8), 100
LANEWISE, OTHER, BASELINE = "#d95f02", "#7b8794", "#d5d9de"
BAR_HEIGHT = 0.6


def figure(z: np.ndarray, bars: list[dict], title: str, surface_title: str, extent: tuple):
    """A matplotlib ``Figure``: the surface ``z`` on the left; time and peak memory per method on the right.

    ``z[i, j]`` is drawn at ``(x[i], y[j])`` over ``extent = (x0, x1, y0, y1)``.

    Example:
        >>> bar = dict(label="lanewise", time_s=0.1, time_text="0.1 s", peak_mb=40.0, base_mb=30.0,
        ...            peak_text="40 MB", guessed=False, highlight=True)
        >>> [ax.get_title() for ax in figure(np.eye(3), [bar], "t", "z", (0, 1, 0, 1)).axes][0]
        'z'
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=FIGSIZE, dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)
    grid = fig.add_gridspec(2, 2, width_ratios=(1.0, 1.5))
    _surface(fig, fig.add_subplot(grid[:, 0]), z, surface_title, extent)
    _time_panel(fig.add_subplot(grid[0, 1]), bars)
    _memory_panel(fig.add_subplot(grid[1, 1]), bars)
    fig.suptitle(title, fontsize=13)
    return fig


def save(fig, out: Path) -> Path:
    """Write ``fig`` as a PNG at ``out`` (its folder made if need be); the path.

    Example:
        >>> import tempfile, pathlib
        >>> from matplotlib.figure import Figure
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     save(Figure(figsize=(1, 1)), pathlib.Path(tmp) / "a" / "f.png").read_bytes()[:4]
        b'\\x89PNG'
    """
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    # No "Software" entry: the PNG's bytes depend on the picture, not on matplotlib's version.
    fig.savefig(out, format="png", metadata={"Software": None})
    return out


def _surface(fig, ax, z: np.ndarray, title: str, extent: tuple) -> None:
    image = ax.imshow(z.T, origin="lower", extent=extent, cmap="viridis")  # z.T: x across, y up
    fig.colorbar(image, ax=ax, label="f(x, y)", shrink=0.9)
    ax.set(xlabel="x", ylabel="y", title=title)


def _time_panel(ax, bars: list[dict]) -> None:
    times = [b["time_s"] for b in bars]
    # Log scale: the times span orders of magnitude, and a linear axis would show only the slowest.
    ax.set_xscale("log")
    lo, hi = min(times) / 3, max(times)
    _draw_bars(ax, bars, [lo] * len(bars), [t - lo for t in times])  # from the axis' edge: a log axis has no 0
    # Room on the right for the text after the longest bar: about a third of the axis.
    ax.set_xlim(lo, hi * 10 ** max(1.0, 0.5 * math.log10(hi / lo)))
    ax.set(title="median time per call (log scale)", xlabel="seconds;  in brackets: time ÷ lanewise's")
    _finish(ax, bars, [b["time_s"] for b in bars], [b["time_text"] for b in bars])


def _memory_panel(ax, bars: list[dict]) -> None:
    peaks = [b["peak_mb"] for b in bars]
    bases = [b["base_mb"] for b in bars]
    # The baseline apart, in light grey: it is what the imports cost, not what the method computes with.
    ax.barh(range(len(bars)), bases, height=BAR_HEIGHT, color=BASELINE)
    _draw_bars(ax, bars, bases, [p - b for p, b in zip(peaks, bases, strict=True)])
    ax.set_xlim(0, max(peaks) * 1.3)
    ax.set(title="peak memory (RSS)", xlabel="MB;  light grey: the baseline (imports + inputs)")
    _finish(ax, bars, peaks, [b["peak_text"] for b in bars])


def _draw_bars(ax, bars: list[dict], lefts: list[float], widths: list[float]) -> None:
    """One bar per method: lanewise coloured, the others grey; a guessed figure hatched, not filled."""
    for k, (b, left, width) in enumerate(zip(bars, lefts, widths, strict=True)):
        color = LANEWISE if b["highlight"] else OTHER
        style = {"facecolor": "white", "edgecolor": color, "hatch": "///"} if b["guessed"] else {"color": color}
        ax.barh(k, width, left=left, height=BAR_HEIGHT, **style)


def _finish(ax, bars: list[dict], ends: list[float], texts: list[str]) -> None:
    """The values written after the bars, and the methods down the axis in the table's order."""
    for k, (b, end, text) in enumerate(zip(bars, ends, texts, strict=True)):
        ax.annotate(text, (end, k), xytext=(4, 0), textcoords="offset points", va="center", fontsize=9,
                    fontweight="bold" if b["highlight"] else "normal")
    ax.set_yticks(range(len(bars)), [b["label"] for b in bars])
    ax.set_ylim(len(bars) - 0.5, -0.5)  # the first method on top, as in the table
    for tick, b in zip(ax.get_yticklabels(), bars, strict=True):
        if b["highlight"]:
            tick.set(fontweight="bold", color=LANEWISE)
    ax.spines[["top", "right"]].set_visible(False)
