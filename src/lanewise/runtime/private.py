"""Folders lanewise loads code from: created for this user only, and trusted only
while no one else can write to them.

Cached kernel modules, Numba's object files and lanewise's own bytecode are code
a process runs.  A folder another user can write to would let them plant it, so
such a folder is not used (speed, never correctness, is lost).  Stdlib only: the
bytecode cache uses it before anything else of lanewise is imported.

Example:
    >>> import tempfile, pathlib
    >>> root = pathlib.Path(tempfile.mkdtemp())
    >>> private_folders(root, root / "a" / "b"), oct((root / "a").stat().st_mode & 0o777)
    (True, '0o700')
"""

from __future__ import annotations

import os
from pathlib import Path


def private_folders(root, folder) -> bool:
    """Create ``root`` and every folder from it down to ``folder`` (inside it) for this
    user only (0700), and say whether code may be loaded from ``folder``: each of
    them owned by this user and writable by no one else."""
    root, folder = Path(root), Path(folder)
    try:
        parts = folder.relative_to(root).parts
    except ValueError:
        return False
    chain = [root] + [root.joinpath(*parts[:k + 1]) for k in range(len(parts))]
    try:
        for path in chain:
            path.mkdir(mode=0o700, parents=True, exist_ok=True)
            info = path.stat()
            if (hasattr(os, "getuid") and info.st_uid != os.getuid()) or info.st_mode & 0o022:
                return False
    except OSError:
        return False
    return True
