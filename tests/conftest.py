"""Test-session setup for lanewise.

Order matters: the cache directory and Numba's allocation statistics are read
from the environment when lanewise / Numba are first imported, so they are set
here, at the very top, before anything imports either of them.
"""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile

# One cache for the whole run: pytest-xdist's workers inherit the controller's
# environment, so they share the directory it made (the corpus lanes are compiled
# once per run, not once per worker), and only the process that made it deletes it.
_CACHE_DIR = os.environ.get("LANEWISE_TEST_RUN_CACHE")
if _CACHE_DIR is None:
    _CACHE_DIR = tempfile.mkdtemp(prefix="lanewise-test-cache-")
    os.environ["LANEWISE_TEST_RUN_CACHE"] = _CACHE_DIR
    atexit.register(shutil.rmtree, _CACHE_DIR, ignore_errors=True)
os.environ["LANEWISE_CACHE_DIR"] = _CACHE_DIR
# test_structure counts the allocations made inside compiled kernels.
os.environ.setdefault("NUMBA_NRT_STATS", "1")

_IMPORTED_EARLY = "lanewise" in sys.modules

import jax  # noqa: E402
import pytest  # noqa: E402
from hypothesis import HealthCheck, Phase, settings  # noqa: E402

jax.config.update("jax_enable_x64", True)

import lanewise as lw  # noqa: E402

if _IMPORTED_EARLY:  # a plugin imported lanewise before us: point it at our cache anyway
    lw.config.cache_dir = _CACHE_DIR

# Every distinct lane signature (dtype, rank, layout, read-only flag, axes) costs
# a Numba compile of about a second, so examples are few and deterministic; set
# LANEWISE_HYPOTHESIS_PROFILE=thorough for a long randomised run.
_COMMON = dict(
    deadline=None,
    database=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                           HealthCheck.function_scoped_fixture, HealthCheck.filter_too_much],
)
# No shrinking under "ci": each shrink step is a new signature, i.e. a new compile.
settings.register_profile("ci", max_examples=6, derandomize=True,
                          phases=[Phase.explicit, Phase.reuse, Phase.generate], **_COMMON)
settings.register_profile("thorough", max_examples=60, derandomize=False, **_COMMON)
settings.load_profile(os.environ.get("LANEWISE_HYPOTHESIS_PROFILE", "ci"))


@pytest.fixture(scope="session")
def cache_dir() -> str:
    assert str(lw.config.cache_dir) == _CACHE_DIR
    return _CACHE_DIR


@pytest.fixture
def restore_config():
    """Undo changes a test makes to ``lw.config``."""
    saved = dict(vars(lw.config))
    yield lw.config
    for k, v in saved.items():
        setattr(lw.config, k, v)


@pytest.fixture
def tpu(monkeypatch):
    """backend="auto" sees a TPU as JAX's default device (its kernels still run where
    ``lw.config.tpu_interpret`` says)."""
    from lanewise.backends import auto

    monkeypatch.setattr(auto, "default_is_tpu", lambda: True)


@pytest.fixture
def no_tpu(monkeypatch):
    """backend="auto" sees no TPU."""
    from lanewise.backends import auto

    monkeypatch.setattr(auto, "default_is_tpu", lambda: False)


# --------------------------------------------------------------------------- the fast tier

#: Files whose tests take seconds to minutes each (subprocesses, the corpus on every
#: backend, CUDA PTX, Dask clusters, timings, whole documents): in the fast tier
#: (``pytest -m "not slow"``) each keeps its first test only, so that every module
#: is still imported and run once.
SLOW_FILES = frozenset({
    "test_backends.py", "test_conformance.py", "test_realworld.py", "test_cuda_ptx.py", "test_cuda_simulator.py",
    "test_cuda_disk_cache.py", "test_cuda_backend.py", "test_cuda_conformance.py", "test_gpu_script.py",
    "test_dask.py", "test_demo.py", "test_threads.py", "test_startup.py", "test_prebuilt.py",
    "test_random_speed_paths.py", "test_compile_work.py", "test_cache_soundness.py", "test_torch_native.py",
    "test_vector_width.py", "test_lanes_doc.py", "test_docs.py", "test_readme.py", "test_structure.py",
    "test_lanemath_accuracy.py", "test_lanemath_vectorised.py", "test_lanemath_specials.py", "test_jax_op.py",
    "test_torch_op.py", "test_spmd_random.py", "test_lint.py", "test_tutorial.py",
    "test_round3_bridges.py",  # derivatives of row lanes through jax and torch: minutes, any four of them
})
#: Tests that took over 15 s each in the fast tier on 2 busy cores (3.11 and 3.12).
SLOW_TESTS = frozenset({
    "test_cuda_suite_on_the_simulator", "test_every_draw_is_bitwise_the_reference_on_the_spmd_path",
    "test_block_reads_match_the_reference_for_every_dtype", "test_a_shared_array_is_read_as_a_table_by_every_lane",
    "test_dict_pytrees_and_np_where_on_scalars_as_in_jax", "test_auto_takes_spmd_for_a_scan_over_rows",
    "test_corpus_runs_spmd_bitwise", "test_no_string_formatting_code_compiles_for_lanewise_itself",
    "test_auto_keeps_light_row_loops_scalar", "test_vmapped_adjoint_code_matches_forward_mode",
    "test_nested_levels_kept_axes_and_tuples", "test_a_million_step_scan_stays_within_the_budget",
    "test_uniform_table_reads_keep_the_full_width", "test_reduction_with_nans_and_ties_like_numpy",
    "test_three_level_nest_and_out_axes", "test_a_libm_call_in_a_w_wide_lane_prints_no_llvm_warnings",
    "test_warm_process_loads_kernels_without_numbas_registries",
    "test_auto_keeps_lanes_whose_branches_each_loop_scalar",
    "test_block_reads_at_any_width", "test_explain_says_how_the_lane_is_called_and_which_math_it_uses",
    "test_python_O_drops_asserts_on_the_spmd_path_too", "test_planted_metadata_is_never_unpickled",
    "test_block_reads_of_any_layout", "test_bits_are_balanced", "test_a_million_step_loop_stays_within_the_budget",
    "test_the_readme_grad_example_pasted_into_the_interactive_interpreter",
    "test_demo_quick_prints_table_agrees_and_saves_png", "test_jit_matches_jax_and_is_one_custom_call",
    "test_planned_sizes_run_without_python", "test_simulator_second_process_reads_the_module_from_disk",
    "test_concurrent_writers", "test_streaming_and_groups_are_both_used", "test_vmap_adds_a_level_not_a_loop",
    "test_vmapped_jacrev_matches_forward_mode", "test_simulator_editing_the_lane_invalidates",
    "test_slow_path_compiles_only_when_an_argument_needs_it", "test_deleting_the_cache_is_safe",
    "test_corrupt_entry_is_rebuilt",
    # stress runs in a subprocess (80 MB arrays, tracemalloc): minutes each on 2 busy cores
    "test_segfault_results_handed_to_jax_are_released_on_a_python_thread",
    "test_segfault_torch_results_are_released_on_a_python_thread",
    # over 12 s each on 2 cores at load 6 (3.11, from a fresh cache), where each file keeps
    # other tests in the fast tier; tests/test_cache.py keeps its second-process test
    "test_jax_jvp_of_row_lanes_matches_lw_jvp_and_jax", "test_jax_grad_and_vjp_of_row_lanes_match_lw_jvp_and_jax",
    "test_segfault_jax_results_are_shared_aligned_not_copied", "test_jax_jacobians_of_row_lanes_match_jax",
    "test_methods_and_dtype_argument", "test_reduction_feeding_elementwise_code_is_a_second_pass",
    "test_corrupt_numba_object_code_is_recompiled", "test_module_on_disk_without_object_code_compiles",
    "test_editing_a_helper_invalidates", "test_lanes_calling_numpy_keep_the_spmd_path",
    "test_auto_takes_block_reads_of_w6_and_keeps_light_loops_scalar",
    "test_array_elements_and_several_outputs_match_jax", "test_the_spmd_path_computes_the_same",
    "test_vmapped_grad_matches_jax_vmap", "test_inside_vmapped_lanes_matches_jax",
    "test_gradient_with_respect_to_a_per_lane_array", "test_corpus_in_groups_without_streaming",
    "test_width_override", "test_grad_and_hessian_match_jax", "test_ordinary_path_still_correct",
    "test_matches_jax_vmap_then_reduce", "test_jax_grad_of_a_row_lane_with_a_shared_row_used_whole",
})
#: Test functions per file in the fast tier (the first ones, in the file's order).
FAST_PER_FILE = 4


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: not in the fast tier (pytest -m 'not slow'; tests/conftest.py)")


def pytest_collection_modifyitems(config, items):
    """Mark ``slow`` all but the fast tier: per file, its first :data:`FAST_PER_FILE`
    test functions (one for :data:`SLOW_FILES`) that are not :data:`SLOW_TESTS` nor
    property-based (hypothesis), each on its first case."""
    functions: dict[str, set[str]] = {}
    kept: dict[str, int] = {}
    for item in items:
        path, function = item.path.name, getattr(item, "originalname", item.name)
        seen = functions.setdefault(path, set())
        heavy = function in SLOW_TESTS or getattr(getattr(item, "obj", None), "is_hypothesis_test", False)
        fast = function not in seen and not heavy \
            and kept.get(path, 0) < (1 if path in SLOW_FILES else FAST_PER_FILE)
        seen.add(function)
        if fast:
            kept[path] = kept.get(path, 0) + 1
        else:
            item.add_marker(pytest.mark.slow)
