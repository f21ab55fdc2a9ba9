"""scripts/build_dispatch.py --update: re-measured ops replace only theirs in one GPU's table."""
from .scripts_loader import load


def _module():
    return load("build_dispatch.py")


def _entry(op, impl, figure):
    return {"op": op, "dtype": "fp32", "shape": [64, 64, 64], "candidates": [{"impl": impl, "params": {}, "figure": figure}]}


def test_update_replaces_one_op_of_one_gpu():
    old = [{"gpu": "A", "command": "first", "measured": "d1", "not_measured": ["sgemm x: FAIL", "reduce y: FAIL"],
            "entries": [_entry("sgemm", "hopper_simt", 1.0), _entry("reduce", "cub", 2.0)]},
           {"gpu": "B", "command": "b", "measured": "d0", "entries": [_entry("sgemm", "cublas", 3.0)]}]
    part = {"gpu": "A", "command": "second", "measured": "d2", "not_measured": [],
            "entries": [_entry("sgemm", "bigtile", 4.0)]}
    new = _module().updated(old, [part])
    a, b = new
    assert [(e["op"], e["candidates"][0]["impl"]) for e in a["entries"]] == [("reduce", "cub"), ("sgemm", "bigtile")]
    assert a["command"] == "first ; second" and a["measured"] == "d2"
    assert a["not_measured"] == ["reduce y: FAIL"]  # the sgemm failure was re-measured away
    assert b == old[1] and old[0]["entries"][0]["candidates"][0]["impl"] == "hopper_simt"  # inputs untouched


def test_update_adds_a_gpu_it_does_not_know():
    part = {"gpu": "C", "command": "c", "measured": "d", "entries": [_entry("sgemm", "bigtile", 1.0)]}
    assert _module().updated([], [part]) == [part]


def test_tuned_candidates_come_from_the_gpus_own_tuning(tmp_path):
    """--tuned DB: a kernel is measured again with what `gemmlab tune` found on this GPU at the
    nearest tuned shape; another GPU's rows, failed points and default-equal points add nothing."""
    from gemmlab import registry
    from gemmlab.problem import GemmProblem
    from gemmlab.store import ResultStore

    mod = _module()
    spec = registry.get("bigtile")
    tuned = {**spec.defaults, "BM": 128, "BN": 128, "TM": 8, "TN": 16, "WM": 64, "WN": 64, "NT": 128, "MINB": 2,
             "STREAMK": 2}
    path = tmp_path / "tune.db"
    with ResultStore(path) as store:
        mine = store.start_run("tune", "t", {"gpu": {"name": "GPU A"}})
        other = store.start_run("tune", "t", {"gpu": {"name": "GPU B"}})
        for run, params, status, gflops in ((mine, tuned, "PASS", 49000.0), (mine, {**tuned, "STREAMK": 1}, "FAIL", 60000.0),
                                            (mine, spec.defaults, "PASS", 37000.0),
                                            (other, {**tuned, "STREAMK": 0}, "PASS", 99000.0)):
            store.add_result(run, op="sgemm", impl="bigtile", impl_kind="kernel", params=params, M=3072, N=3072,
                             K=3072, dtype="fp32", status=status, gflops=gflops)
    problem = GemmProblem(3000, 3100, 3072, 1.0, 0.0)
    got = mod.tuned_candidates([spec, registry.get("cublas", "sgemm")], problem, str(path), "GPU A")
    assert [(c.name, c.resolve({})) for c in got] == [("bigtile", tuned)]
    assert mod.tuned_candidates([spec], problem, None, "GPU A") == []
    assert mod.tuned_candidates([spec], problem, str(path), "GPU C") == []


def test_table_candidates_carry_the_tables_parameter_sets(tmp_path):
    """--table FILE: every other parameter set the table lists for this GPU, op, dtype and exact
    shape is measured again (tuned points survive a re-measurement without their database);
    defaults, repeats, libraries, other GPUs, other shapes and sets the spec now refuses add nothing."""
    import json

    from gemmlab import registry
    from gemmlab.problem import GemmProblem

    mod = _module()
    spec = registry.get("bigtile")
    tuned = {**spec.defaults, "BM": 64, "BN": 256, "NT": 128}
    cands = [{"impl": "bigtile", "params": tuned, "figure": 3.0}, {"impl": "bigtile", "params": dict(tuned), "figure": 2.9},
             {"impl": "bigtile", "params": spec.defaults, "figure": 2.0}, {"impl": "cublas", "params": {}, "figure": 4.0},
             {"impl": "bigtile", "params": {**spec.defaults, "BM": 3}, "figure": 1.0}]
    table = {"gpus": [{"gpu": "GPU A", "entries": [{"op": "sgemm", "dtype": "fp32", "shape": [2048, 2048, 2048],
                                                      "candidates": cands}]},
                      {"gpu": "GPU B", "entries": [{"op": "sgemm", "dtype": "fp32", "shape": [2048, 2048, 2048],
                                                      "candidates": [{"impl": "bigtile", "params": {**tuned, "BN": 128},
                                                                      "figure": 9.0}]}]}]}
    path = tmp_path / "dispatch.json"
    path.write_text(json.dumps(table))
    impls = [spec, registry.get("cublas", "sgemm")]
    got = mod.table_candidates(impls, GemmProblem(2048, 2048, 2048, 1.0, 0.0), str(path), "GPU A")
    assert [(c.name, c.resolve({})) for c in got] == [("bigtile", spec.resolve(tuned))]
    assert mod.table_candidates(impls, GemmProblem(2048, 2048, 2049, 1.0, 0.0), str(path), "GPU A") == []
    assert mod.table_candidates(impls, GemmProblem(2048, 2048, 2048, 1.0, 0.0), None, "GPU A") == []


def test_listed_variants_are_valid_and_differ_from_the_defaults():
    """VARIANTS: every parameter set the script measures beside a kernel's defaults passes the
    kernel's constraints (a refused set would be dropped silently) and is not the default itself."""
    from gemmlab import registry

    mod = _module()
    for (op, name), sets in mod.VARIANTS.items():
        impl = registry.get(name, op)
        assert any(name in names for (o, _), names in mod.CANDIDATES.items() if o == op), f"{name} is a candidate"
        for values in sets:
            assert not impl.failed_constraints({**impl.defaults, **values}), (name, values)
            assert impl.resolve(values) != impl.resolve({}), (name, values)
        got = mod.listed_variants([impl], op)
        assert [v.resolve({}) for v in got] == [impl.resolve(values) for values in sets]
        assert {v.name for v in got} == {name}, "a variant keeps its kernel's name: the table stores params beside it"


def test_update_replaces_only_the_re_measured_dtypes_of_an_op():
    def hentry(dtype, impl):
        return {**_entry("hgemm", impl, 1.0), "dtype": dtype}

    old = [{"gpu": "A", "command": "first", "measured": "d1",
            "not_measured": ["hgemm tf32 64x64x64 cublas: FAIL", "hgemm bf16 64x64x64 mma_sync: FAIL"],
            "entries": [hentry("bf16", "mma_sync"), hentry("tf32", "cublas")]}]
    part = {"gpu": "A", "command": "second", "measured": "d2", "not_measured": [], "entries": [hentry("tf32", "tf32_wgmma")]}
    (a,) = _module().updated(old, [part])
    assert [(e["dtype"], e["candidates"][0]["impl"]) for e in a["entries"]] == [("bf16", "mma_sync"), ("tf32", "tf32_wgmma")]
    assert a["not_measured"] == ["hgemm bf16 64x64x64 mma_sync: FAIL"]


def test_a_part_of_some_shapes_replaces_only_their_entries():
    """--shapes: the part carries the shapes it measured; --update swaps those entries (and their
    failure lines) and keeps the op's other shapes."""
    def entry(shape, impl, figure):
        return {"op": "hgemm", "dtype": "bf16", "shape": shape,
                "candidates": [{"impl": impl, "params": {}, "figure": figure}]}

    old = [{"gpu": "A", "command": "full", "measured": "d1",
            "not_measured": ["hgemm bf16 4096x4096x4096 mma_sync: FAIL x", "hgemm bf16 1024x1024x1024 wmma: FAIL y"],
            "entries": [entry([1024, 1024, 1024], "cublas", 1.0), entry([4096, 4096, 4096], "cublas", 2.0),
                        {**entry([4096, 4096, 4096], "cublas", 3.0), "dtype": "fp16"}]}]
    part = {"gpu": "A", "command": "part", "measured": "d2", "not_measured": [], "shapes": [[4096, 4096, 4096]],
            "entries": [entry([4096, 4096, 4096], "persistent", 2.5)]}
    (a,) = _module().updated(old, [part])
    assert [(e["dtype"], e["shape"][0], e["candidates"][0]["impl"]) for e in a["entries"]] == [
        ("bf16", 1024, "cublas"), ("bf16", 4096, "persistent"), ("fp16", 4096, "cublas")], "in their places"
    assert a["not_measured"] == ["hgemm bf16 1024x1024x1024 wmma: FAIL y"]
    assert "shapes" not in a and a["command"] == "full ; part"


def test_shapes_are_read_as_the_table_stores_them():
    assert _module().suite_shapes("4096,1000x3000x2000") == [[4096, 4096, 4096], [1000, 3000, 2000]]


def test_a_16bit_c_part_sits_beside_the_fp32_c_entries():
    """--out-dtype c16: its entries carry their C type and replace only entries of that C type
    (and their failure lines); an fp32-C part leaves them, and their failures, alone."""
    def entry(impl, out=None, shape=(4096, 4096, 4096)):
        e = {"op": "hgemm", "dtype": "bf16", "shape": list(shape), "candidates": [{"impl": impl, "params": {}, "figure": 1.0}]}
        return {**e, "out_dtype": out} if out else e

    old = [{"gpu": "A", "command": "full", "measured": "d1",
            "not_measured": ["hgemm bf16 4096x4096x4096 wmma: FAIL x", "hgemm bf16/bf16 4096x4096x4096 wmma: FAIL y"],
            "entries": [entry("persistent"), entry("cublas", "bf16")]}]
    c16 = {"gpu": "A", "command": "c16", "measured": "d2", "not_measured": [], "shapes": [[4096, 4096, 4096]],
           "entries": [entry("persistent", "bf16")]}
    (a,) = _module().updated(old, [c16])
    assert [(e.get("out_dtype"), e["candidates"][0]["impl"]) for e in a["entries"]] == [
        (None, "persistent"), ("bf16", "persistent")]
    assert a["not_measured"] == ["hgemm bf16 4096x4096x4096 wmma: FAIL x"]
    fp32 = {"gpu": "A", "command": "fp32", "measured": "d3", "not_measured": [], "entries": [entry("cublas")]}
    (b,) = _module().updated(old, [fp32])
    assert [(e.get("out_dtype"), e["candidates"][0]["impl"]) for e in b["entries"]] == [("bf16", "cublas"), (None, "cublas")]
    assert b["not_measured"] == ["hgemm bf16/bf16 4096x4096x4096 wmma: FAIL y"], "a whole fp32-C op keeps the C16 lines"


def test_16bit_c_problems_write_c_in_the_input_type():
    mod = _module()
    assert {p.out_dtype for p in mod.problems("hgemm", "bf16", c16=True)} == {"bf16"}
    assert {p.out_dtype for p in mod.problems("hgemm", "fp16")} == {"fp32"}
    assert mod.row_kind("bf16", "bf16") == "bf16/bf16" and mod.row_kind("bf16") == "bf16"
    assert mod.C16_PAIRS == {("hgemm", "fp16"), ("hgemm", "bf16")}


def test_a_parameter_set_listed_for_both_c_types_is_measured_once(tmp_path):
    """--table with entries of both C types at the shape: each stored set counts with the flags
    of the problem measured (an fp32-C entry stored OUT16 = 0), so a set listed for both is one
    candidate, and the kernel's defaults under those flags are none."""
    import json

    from gemmlab import registry
    from gemmlab.problem import GemmProblem

    spec = registry.get("persistent", "hgemm")
    fp32_set = {**spec.defaults, "DTYPE": 1, "OUT16": 0, "CM": 1}
    c16_set = {**fp32_set, "OUT16": 1}
    defaults_c16 = {**spec.defaults, "DTYPE": 1, "OUT16": 1}
    entries = [{"op": "hgemm", "dtype": "bf16", "shape": [4096, 4096, 4096],
                "candidates": [{"impl": "persistent", "params": fp32_set, "figure": 2.0}]},
               {"op": "hgemm", "dtype": "bf16", "out_dtype": "bf16", "shape": [4096, 4096, 4096],
                "candidates": [{"impl": "persistent", "params": c16_set, "figure": 2.0},
                               {"impl": "persistent", "params": defaults_c16, "figure": 1.0}]}]
    path = tmp_path / "dispatch.json"
    path.write_text(json.dumps({"gpus": [{"gpu": "GPU A", "entries": entries}]}))
    problem = GemmProblem(4096, 4096, 4096, 1.0, 0.0, "bf16", "nn", "bf16")
    got = _module().table_candidates([spec], problem, str(path), "GPU A")
    assert [c.resolve({}) for c in got] == [spec.resolve(c16_set)]


def test_16bit_c_entries_go_in_only_beside_a_gpus_table(tmp_path, capsys):
    import json

    import pytest

    part = {"gpu": "A", "arch": "sm_90", "command": "c16", "measured": "d", "entries": [
        {"op": "hgemm", "dtype": "bf16", "out_dtype": "bf16", "shape": [64, 64, 64],
         "candidates": [{"impl": "cublas", "params": {}, "figure": 1.0}]}]}
    path = tmp_path / "c16.json"
    path.write_text(json.dumps(part))
    mod = _module()
    monkey = pytest.MonkeyPatch()
    monkey.setattr("sys.argv", ["build_dispatch.py", "--merge", str(path), "--out", str(tmp_path / "t.json")])
    try:
        with pytest.raises(SystemExit) as exc:
            mod.main()
    finally:
        monkey.undo()
    assert exc.value.code == 2 and "go in with --update" in capsys.readouterr().err
    assert not (tmp_path / "t.json").exists()


def test_each_kernel_is_measured_once_with_the_problems_flags():
    """A listed variant (built from its own defaults, OUT16 = 0) and a table candidate of the same
    parameters measured with a 16-bit C (OUT16 = 1) build one kernel for a 16-bit-C problem: it is
    measured once. So is a candidate that builds the kernel's defaults; others keep their order."""
    from gemmlab import registry
    from gemmlab.problem import GemmProblem

    mod = _module()
    spec = registry.get("persistent", "hgemm")
    c16 = GemmProblem(4096, 4096, 4096, 1.0, 0.0, "bf16", "nn", "bf16")
    listed = spec.variant(spec.name, spec.title, spec.idea, **spec.resolve({"BN": 128, "CM": 1}))
    tabled = spec.variant(spec.name, spec.title, spec.idea, **spec.resolve({"BN": 128, "CM": 1, "OUT16": 1}))
    other = spec.variant(spec.name, spec.title, spec.idea, **spec.resolve({"BN": 192, "CM": 1}))
    default_built = spec.variant(spec.name, spec.title, spec.idea, **spec.resolve({"OUT16": 1}))
    assert listed.resolve({})["OUT16"] == 0 and tabled.resolve({})["OUT16"] == 1
    got = mod.new_builds([spec, registry.get("cublas", "hgemm")], [listed, default_built, tabled, other], c16)
    assert got == [listed, other]
    # an fp32-C problem sets OUT16 = 0 for both: one kernel there too
    fp32 = GemmProblem(4096, 4096, 4096, 1.0, 0.0, "bf16", "nn", "fp32")
    assert mod.built_as(tabled, fp32) == mod.built_as(listed, fp32)
