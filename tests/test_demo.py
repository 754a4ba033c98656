"""``python -m lanewise demo``: runs end to end, prints its table, agrees, saves a PNG."""

import os
import subprocess
import sys

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _run(args, tmp_path, timeout=300):
    env = {**os.environ, "LANEWISE_CACHE_DIR": str(tmp_path / "cache")}
    return subprocess.run([sys.executable, "-m", "lanewise", *args], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=timeout)


def test_demo_quick_prints_table_agrees_and_saves_png(tmp_path):
    out = tmp_path / "x.png"
    proc = _run(["demo", "--quick", "--out", str(out)], tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    data = out.read_bytes()
    assert data.startswith(PNG_MAGIC) and len(data) > len(PNG_MAGIC)
    lines = proc.stdout.splitlines()
    for method in ("python loops", "numpy meshgrid", "lanewise nested vmap"):
        assert any(line.startswith(method) for line in lines), proc.stdout
    assert any(line.startswith("python loops (extrapolated") for line in lines), proc.stdout
    assert any(line.startswith("agree:") for line in lines), proc.stdout
    assert not (tmp_path / "lanewise_demo.png").exists()  # --out was honoured


def test_help_lists_the_demo_command(tmp_path):
    proc = _run(["--help"], tmp_path, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "usage:" in proc.stdout and "demo" in proc.stdout
