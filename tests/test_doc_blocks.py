"""Every ```python block of README.md and docs/ runs on its own (issue 45, item 1):
in a fresh interpreter, in an empty temporary folder, fed as a user pastes it.

How it is fed: the block's text on the standard input of ``python -`` (what
``pbcopy | python -`` or a pipe does), so lanes have no file behind them, as when
pasted. The interactive interpreter differs in one way, which
:func:`test_every_block_pastes_into_the_interactive_interpreter` covers instead:
a blank line ends an indented body there, so no block has one inside a statement.

The exceptions, each said in the fence (tests/docblocks.py): ```python needs=cuda
(skipped, saying so, where there is no such hardware or package) and ```python
continues (the page's previous blocks run first). A ```text block right after a
block is what it prints: compared line for line, where ``...`` stands for any text
(doctest's ELLIPSIS), so a block prints numbers rounded to the digits it shows.

A block writes nothing into the folder it runs in (issue 45: docs/dask.md's first
block wrote 28.8 GB there): a file it makes goes to a temporary folder of its own.
"""

from __future__ import annotations

import doctest
import importlib.util
import os
import shutil
import subprocess
import sys

import pytest
from docblocks import ROOT, every_block, repl_breaks
from optional import TORCH_ABSENT

BLOCKS = every_block()
#: Seconds one block may take; the slowest compiles a few kernels on a cold cache.
TIMEOUT = 600


def _cuda() -> str | None:
    """Why there is no GPU to run a needs=cuda block on (None: there is one)."""
    try:
        from numba import config, cuda
    except ImportError as e:  # numba-cuda absent
        return f"numba.cuda cannot be imported ({e})"
    if config.ENABLE_CUDASIM:
        return "NUMBA_ENABLE_CUDASIM is set: the simulator is not a GPU"
    return None if cuda.is_available() else "numba.cuda.is_available() is False: no CUDA GPU here"


def _torch() -> str | None:
    return None if importlib.util.find_spec("torch") else TORCH_ABSENT


def _tpu() -> str | None:
    """A needs=tpu block runs anywhere JAX imports: without a TPU, in Pallas' interpret
    mode on the CPU (:data:`ENV`), as the page tells the reader to."""
    return None if importlib.util.find_spec("jax") else "jax is not installed"


#: What each needs=X a fence may say is checked by.
NEEDS = {"cuda": _cuda, "torch": _torch, "tpu": _tpu}
#: The environment a needs=X block runs in here (the blocks run with JAX_PLATFORMS=cpu).
ENV = {"tpu": {"LANEWISE_TPU_INTERPRET": "1"}}


def test_the_pages_have_blocks():
    pages = {b.page for b in BLOCKS}
    assert {"README.md", "docs/dask.md", "docs/autodiff.md"} <= pages and len(BLOCKS) >= 30


def test_fences_say_only_needs_and_continues():
    wrong = [f"{b.id} (line {b.line}): {w}" for b in BLOCKS for w in b.unknown]
    wrong += [f"{b.id} (line {b.line}): needs={n} (known: {sorted(NEEDS)})" for b in BLOCKS for n in b.needs
              if n not in NEEDS]
    wrong += [f"{b.id} (line {b.line}): continues, but it is the page's first block" for b in BLOCKS
              if b.continues and b.previous is None]
    assert not wrong, "fence words other than needs=X (X known) and continues:\n" + "\n".join(wrong)


def test_every_block_pastes_into_the_interactive_interpreter():
    broken = [f"{b.id} (page line {b.line}) {p}" for b in BLOCKS for p in repl_breaks(b.code)]
    assert not broken, "blocks that would stop early if pasted at >>>:\n" + "\n".join(broken)


@pytest.mark.parametrize("block", BLOCKS, ids=lambda b: b.id)
def test_block_runs_alone_pasted_into_python(block, tmp_path):
    for need in block.needs:
        why = NEEDS[need]() if need in NEEDS else f"needs={need} is not a known need"
        if why:
            pytest.skip(f"needs {need}: {why}")
    here, scratch = tmp_path / "cwd", tmp_path / "tmp"  # the current folder; the block's tempfile folders
    here.mkdir()
    scratch.mkdir()
    src = str(ROOT / "src")  # this checkout's lanewise, also in a worktree or an uninstalled clone
    # an empty kernel cache, as on a fresh machine: a kernel another test compiled from the
    # same text elsewhere would name that file in the generated source lw.explain prints
    env = dict(os.environ, JAX_PLATFORMS="cpu", TMPDIR=str(scratch), LANEWISE_CACHE_DIR=str(scratch / "kernels"),
               PYTHONPATH=os.pathsep.join(p for p in [src, os.environ.get("PYTHONPATH")] if p))
    for need in block.needs:
        env.update(ENV.get(need, {}))
    try:
        # a pipe, not a file: the text of what is piped is kept nowhere, as when pasted
        run = subprocess.run([sys.executable, "-"], input=block.program(), cwd=here, env=env,
                             capture_output=True, text=True, timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{block.id} (line {block.line}) ran past {TIMEOUT} s")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)  # pytest keeps its last runs' folders: not a block's output
    assert run.returncode == 0, f"{block.id} (line {block.line}) failed when pasted:\n{run.stderr[-3000:]}"
    left = sorted(p.name for p in here.iterdir())
    assert not left, f"{block.id} (line {block.line}) wrote into the current folder: {left}"
    if block.output is not None:
        checker, options = doctest.OutputChecker(), doctest.ELLIPSIS
        if not checker.check_output(block.output, run.stdout, options):
            example = doctest.Example(block.code, block.output)
            pytest.fail(f"{block.id} (line {block.line}) printed other than its text block:\n"
                        + checker.output_difference(example, run.stdout, options))
