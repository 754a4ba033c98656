"""benchmarks/gpu.py runs end to end (tiny sizes, on the simulator), so a session
lent a GPU spends its minutes measuring, not debugging the script."""

import importlib.util
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "gpu.py"


def test_gpu_benchmark_script_tiny(capsys):
    spec = importlib.util.spec_from_file_location("lw_gpu_benchmark", SCRIPT)
    gpu = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gpu)
    assert gpu.main(["--tiny"]) == 0
    out = capsys.readouterr().out
    assert "FAILED" not in out, out
    for row in ("copy (device to device)", "W1 grid", "W2 fractal", "W3 backtest", "W5 map-reduce",
                "warm process"):
        assert row in out, out
    assert "reproducible: True" in out and "max rel diff vs CPU 0.0e+00" in out, out
