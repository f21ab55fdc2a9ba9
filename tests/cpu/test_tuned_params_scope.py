"""Where a tuning database's parameters apply (session 26's review): only to what the tune
measured (layout nn, an fp32 C), only with names the spec still has; params= only with the
implementation they belong to; a named database is the file named, whatever the working
directory becomes."""
import pytest

import gemmlab
from gemmlab import registry
from gemmlab.api import core, dispatch, tuning
from gemmlab.errors import BadArgumentError
from gemmlab.harness.tuned import usable_best
from gemmlab.problem import GemmProblem
from gemmlab.store import ResultStore

TABLE = {"gpus": [{"gpu": "GPU A", "arch": "sm_90", "command": "c", "entries": [
    {"op": "sgemm", "dtype": "fp32", "shape": [1024, 1024, 1024],
     "candidates": [{"impl": "hopper_simt", "params": {"GROUP": 4}, "figure": 30.0},
                    {"impl": "cublas", "params": {}, "figure": 29.0}]}]}]}


def _tuned_db(path, impl, params, dtype="fp32", shape=(4096, 4096, 4096)):
    with ResultStore(path) as store:
        run = store.start_run("tune", "t", {"gpu": {"name": "GPU A"}})
        store.add_result(run, op="hgemm" if dtype != "fp32" or impl == "tf32_wgmma" else "sgemm", impl=impl,
                         impl_kind="kernel", params=params, M=shape[0], N=shape[1], K=shape[2], dtype=dtype,
                         status="PASS", gflops=1.0)
    return path


def test_tuned_parameters_apply_only_to_the_layout_and_c_type_the_tune_measured(tmp_path):
    spec = registry.get("tf32_wgmma", "hgemm")
    tuned = {**spec.defaults, "BN": 256}
    assert not spec.failed_constraints(tuned)
    db = _tuned_db(tmp_path / "t.db", "tf32_wgmma", tuned, dtype="tf32")
    with ResultStore(db) as store:
        assert usable_best(store, "GPU A", spec, GemmProblem(4096, 4096, 4096, dtype="tf32")) == tuned
        # tn: the recorded A_MNMAJOR = 0 would override the problem's, and BN = 256 breaks tn's rule
        assert usable_best(store, "GPU A", spec, GemmProblem(4096, 4096, 4096, dtype="tf32", layout="tn")) is None
        assert usable_best(store, "GPU A", spec, GemmProblem(4096, 4096, 4096, dtype="tf32", layout="nt")) is None
    persistent = registry.get("persistent", "hgemm")
    db16 = _tuned_db(tmp_path / "h.db", "persistent", dict(persistent.defaults), dtype="bf16")
    with ResultStore(db16) as store:
        assert usable_best(store, "GPU A", persistent, GemmProblem(4096, 4096, 4096, dtype="bf16")) is not None
        assert usable_best(store, "GPU A", persistent,
                           GemmProblem(4096, 4096, 4096, dtype="bf16", out_dtype="bf16")) is None


def test_a_named_kernel_that_copies_transposed_views_gets_its_nn_tuning(tmp_path, monkeypatch):
    """bigtile reads row-major only: a call with x @ W.T copies to row-major and runs the nn kernel,
    tuned parameters and all, and explain must say the same (review of session 26's own diff)."""
    spec = registry.get("bigtile", "sgemm")
    tuned = {**spec.defaults, "BM": 64, "NT": 128, "MINB": 2}
    monkeypatch.setenv("GEMMLAB_DB", str(_tuned_db(tmp_path / "t.db", "bigtile", tuned)))
    monkeypatch.setattr(tuning, "_named", None)
    tuning._cache.clear()
    for layout in ("nn", "nt", "tn"):
        _, _, chosen = core.decide("sgemm", GemmProblem(4096, 4096, 4096, layout=layout), (4096, 4096, 4096),
                                   "bigtile", None, "GPU A", "sm_90")
        assert chosen == tuned, layout


def test_a_parameter_the_spec_no_longer_has_makes_the_row_unusable(tmp_path):
    spec = registry.get("autotuned", "sgemm")
    db = _tuned_db(tmp_path / "old.db", "autotuned", {**spec.defaults, "VEC": 1})
    with ResultStore(db) as store:
        assert usable_best(store, "GPU A", spec, GemmProblem(4096, 4096, 4096)) is None


def test_the_api_cache_keys_on_layout_and_c_type(tmp_path, monkeypatch):
    spec = registry.get("tf32_wgmma", "hgemm")
    tuned = {**spec.defaults, "BN": 256}
    monkeypatch.setenv("GEMMLAB_DB", str(_tuned_db(tmp_path / "t.db", "tf32_wgmma", tuned, dtype="tf32")))
    monkeypatch.setattr(tuning, "_named", None)
    tuning._cache.clear()
    assert tuning.tuned_params(spec, GemmProblem(4096, 4096, 4096, dtype="tf32"), "GPU A") == tuned
    assert tuning.tuned_params(spec, GemmProblem(4096, 4096, 4096, dtype="tf32", layout="tn"), "GPU A") is None


@pytest.fixture
def table(monkeypatch):
    monkeypatch.setattr(dispatch, "_tables", TABLE)
    monkeypatch.delenv("GEMMLAB_DB", raising=False)
    monkeypatch.setattr(tuning, "_named", None)


def test_params_without_impl_are_refused_in_one_line(table):
    """Which kernel's? The pick changes with the shape and the GPU: explain printed the table's
    parameters while the call built the spec's defaults with the caller's value."""
    with pytest.raises(BadArgumentError, match=r"params \{'STAGES': 2\} need impl=") as info:
        gemmlab.explain(op="sgemm", shape=(1024, 1024, 1024), params={"STAGES": 2}, gpu="GPU A", arch="sm_90")
    assert "\n" not in str(info.value)
    text = gemmlab.explain(op="sgemm", shape=(1024, 1024, 1024), params={}, gpu="GPU A", arch="sm_90")
    assert "hopper_simt" in text and "GROUP=4" in text, "params={} is no override: the table's parameters"


def test_empty_params_keep_the_tables_parameters(table):
    choice, _, chosen = core.choose("sgemm", GemmProblem(1024, 1024, 1024), (1024, 1024, 1024), None, {},
                                    "GPU A", "sm_90")
    assert choice.impl == "hopper_simt" and chosen == {"GROUP": 4} == choice.params


def test_a_relative_database_stays_the_file_named(tmp_path, monkeypatch):
    monkeypatch.delenv("GEMMLAB_DB", raising=False)
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    ResultStore(tmp_path / "a" / "t.db")
    monkeypatch.chdir(tmp_path / "a")
    try:
        gemmlab.use_tuning("t.db")
        monkeypatch.chdir(tmp_path / "b")
        assert tuning.database() == str(tmp_path / "a" / "t.db")
        assert "no such file" not in tuning.describe()
    finally:
        gemmlab.use_tuning(None)
    monkeypatch.setenv("GEMMLAB_DB", str(tmp_path / "missing.db"))
    assert "no such file, so the shipped table's parameters" in tuning.describe()


def _named_by_env(monkeypatch, path):
    """GEMMLAB_DB names `path`, no use_tuning, nothing looked up or warned of yet."""
    monkeypatch.setenv("GEMMLAB_DB", str(path))
    monkeypatch.setattr(tuning, "_named", None)
    monkeypatch.setattr(tuning, "_warned", set())
    tuning._cache.clear()


def test_a_named_database_that_is_missing_warns_once_and_the_table_serves(tmp_path, monkeypatch):
    """A mistyped GEMMLAB_DB slowed a program with no word: the first lookup now warns, once a path."""
    spec = registry.get("tf32_wgmma", "hgemm")
    missing = tmp_path / "missing.db"
    _named_by_env(monkeypatch, missing)
    with pytest.warns(UserWarning, match=f"no tuning database at {missing} \\(named by GEMMLAB_DB\\)"):
        assert tuning.tuned_params(spec, GemmProblem(4096, 4096, 4096, dtype="tf32"), "GPU A") is None
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a second shape's first lookup: no second warning for the path
        assert tuning.tuned_params(spec, GemmProblem(1024, 1024, 1024, dtype="tf32"), "GPU A") is None


def test_a_named_database_that_is_empty_warns_once_and_is_left_empty(tmp_path, monkeypatch):
    """GEMMLAB_DB naming an empty file (a tune about to make it): the reader wrote gemmlab's schema
    into it; then, read-only, every call that picked a gemmlab kernel raised. It holds no tuned
    results, so it is as a missing file: one warning, the shipped table's parameters."""
    spec = registry.get("tf32_wgmma", "hgemm")
    empty = tmp_path / "empty.db"
    empty.touch()
    _named_by_env(monkeypatch, empty)
    with pytest.warns(UserWarning, match=f"the tuning database {empty} is empty \\(named by GEMMLAB_DB\\)"):
        assert tuning.tuned_params(spec, GemmProblem(4096, 4096, 4096, dtype="tf32"), "GPU A") is None
    assert "an empty file, so the shipped table's parameters" in tuning.describe()
    assert empty.stat().st_size == 0


def test_a_damaged_named_database_is_refused_naming_what_named_it(tmp_path, monkeypatch):
    """The refusal said '--db' (the CLI's option) and gave the path twice."""
    spec = registry.get("tf32_wgmma", "hgemm")
    bad = tmp_path / "bad.db"
    bad.write_bytes(b"not a database at all, but long enough to be read as one" * 20)
    _named_by_env(monkeypatch, bad)
    with pytest.raises(BadArgumentError) as info:
        tuning.tuned_params(spec, GemmProblem(4096, 4096, 4096, dtype="tf32"), "GPU A")
    text = str(info.value)
    assert "name another one with GEMMLAB_DB" in text and text.count(str(bad)) == 1 and "--db" not in text
