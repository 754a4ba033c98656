"""Dispatch overhead: one lanewise call on 1,000 lanes vs a direct ``numba.njit`` call."""
import statistics
import timeit
import traceback

import numpy as np

ID = "dispatch"
LANES = 1000


def lane(v):
    return v * 2.0 + 1.0


def _numba_direct():
    import numba

    @numba.njit
    def direct(x):
        out = np.empty_like(x)
        for i in range(x.size):
            out[i] = x[i] * 2.0 + 1.0
        return out

    return direct


def candidates(lw_ok) -> dict:
    found = {"numpy x*2+1": lambda a: a * 2.0 + 1.0, "numba.njit direct loop": _numba_direct()}
    if lw_ok[0]:
        import lanewise as lw

        found["lanewise vmap"] = lw.vmap(lane)
    return found


def per_call_us(fn, x, repeats: int) -> float:
    """Median over ``repeats`` batches (each >= 0.2 s) of the time per call."""
    timer = timeit.Timer(lambda: fn(x))
    number, _ = timer.autorange()
    return statistics.median(timer.repeat(repeat=repeats, number=number)) / number * 1e6


def measure(name, fn, x, repeats) -> dict:
    try:
        np.testing.assert_array_equal(np.asarray(fn(x)), x * 2.0 + 1.0)
        return {"tool": name, "status": "ok", "us_per_call": per_call_us(fn, x, repeats)}
    except Exception as exc:  # noqa: BLE001 - a failing tool is a row
        traceback.print_exc(limit=3)
        return {"tool": name, "status": "error", "note": f"{type(exc).__name__}: {exc}"[:300]}


def run(repeats: int, lw_ok, mode: str = "full") -> dict:
    x = np.arange(LANES, dtype=np.float64)
    print(f"dispatch overhead, {LANES} lanes", flush=True)
    rows = [measure(name, fn, x, repeats) for name, fn in candidates(lw_ok).items()]
    if not lw_ok[0]:
        rows.append({"tool": "lanewise vmap", "status": "n/a", "note": lw_ok[1]})
    us = {r["tool"]: r.get("us_per_call") for r in rows}
    lw_us, nb_us = us.get("lanewise vmap"), us["numba.njit direct loop"]
    overhead = None if lw_us is None or nb_us is None else lw_us - nb_us
    return {"id": ID, "lanes": LANES, "rows": rows, "overhead_us": overhead,
            "ratio": None if overhead is None else lw_us / nb_us}
