"""dispatch.choose picks the nearest entry from what it remembers of each table (dispatch._pool,
session 38: the filter, the logs and the alignment of every entry cost 50-90 us a new shape).
What it chooses, why, and its evidence must be what choose gave before; the reference below is
choose as it stood then, run against the shipped tables with round_fill's model and real and
made-up refusals, a made-up fill that reorders nearly everything, hand-made entries (ties, not
listed fastest first, CUB at the top) and tables replaced or grown."""
from __future__ import annotations

import hashlib
import math
import random

import pytest

from gemmlab.api import candidates, core, dispatch

GPUS = (("NVIDIA H200", "sm_90"), ("NVIDIA H100 80GB HBM3", "sm_90"))


# --- the reference: choose as it stood before session 38 ---

def ref_distance(a, b):
    logs = lambda shape: tuple(math.log(max(x, 1)) for x in shape)  # noqa: E731
    return sum(abs(x - y) for x, y in zip(logs(tuple(a)), logs(tuple(b))))


def ref_refit(ranked, measured, dims, fill):
    if fill is None or tuple(measured) == tuple(dims):
        return ranked, {}
    lowered = {}
    for c in ranked:
        here, there = fill(c["impl"], c.get("params") or {}, tuple(dims)), fill(c["impl"], c.get("params") or {}, tuple(measured))
        if here is not None and there and here < there * (1 - dispatch.REFIT_TOLERANCE):
            lowered[id(c)] = (c["figure"] * here / there, here, there)
    if not lowered:
        return ranked, {}
    figure = {id(c): lowered.get(id(c), (c["figure"],))[0] for c in ranked}
    return sorted(ranked, key=lambda c: -figure[id(c)]), lowered


def ref_prefer_prepared(ranked):
    if not ranked or ranked[0]["impl"] not in dispatch.SLOW_HOST:
        return ranked
    top = ranked[0]["figure"]
    close = [c for c in ranked[1:] if c["impl"] not in dispatch.SLOW_HOST
             and c["figure"] >= (1 - dispatch.SLOW_HOST_MARGIN) * top]
    if not close:
        return ranked
    return close[:1] + [c for c in ranked if c is not close[0]]


def ref_counted(c, lowered):
    if id(c) in lowered:
        return f"{lowered[id(c)][0]:.1f} (measured {c['figure']:.1f})"
    return f"{c['figure']:.1f}"


def ref_choose(op, dtype, dims, gpu, arch, accepts=lambda impl: "", out_dtype="fp32", fill=None):
    d = dispatch
    table, where = d._table_for(gpu, arch)
    entries = [e for e in (table or {}).get("entries", []) if e["op"] == op and e["dtype"] == dtype]
    entries = [e for e in entries if d.entry_out(e) in (out_dtype, "fp32")]
    distance = {id(e): ref_distance(e["shape"], dims) for e in entries}
    nearest = lambda pool: min(pool, key=lambda e: (distance[id(e)], d.entry_out(e) != out_dtype,  # noqa: E731
                                                     e["shape"]))
    alike = [e for e in entries if d.aligned(op, dtype, e["shape"]) == d.aligned(op, dtype, dims)]
    if entries:
        entry = nearest(alike or entries)
        where_shape = "this shape" if tuple(entry["shape"]) == tuple(dims) else "the nearest measured shape"
        if alike and entry is not nearest(entries):
            where_shape += (" whose rows are whole 16-byte units, as this call's are" if d.aligned(op, dtype, dims)
                            else " whose rows are not whole 16-byte units, as this call's are not")
        shape = "x".join(map(str, entry["shape"]))
        measured_out = d.entry_out(entry)
        c_text = f" C {measured_out}" if measured_out != "fp32" else ""
        ranked, lowered = ref_refit(entry["candidates"], entry["shape"], dims, fill)
        ranked = ref_prefer_prepared(ranked)
        evidence = tuple((c["impl"], c["figure"]) for c in ranked)
        refused = []
        for c in ranked:
            why = accepts(c["impl"])
            if why:
                refused.append(f"{c['impl']}: {why}")
                continue
            lead = "fastest" if not refused else "fastest that accepts this problem"
            first = entry["candidates"][0]
            if c is not first and not refused and first["impl"] in d.SLOW_HOST and id(first) not in lowered:
                lead = (f"within {d.SLOW_HOST_MARGIN:.0%} of {first['impl']} (whose call costs far more "
                        "host time) and a prepared launch")
            unit = "GB/s" if op == "reduce" else "TFLOP/s"
            reason = (f"{lead} at {shape} ({where_shape}), {where}: {c['impl']} {ref_counted(c, lowered)} {unit}")
            if len(ranked) > 1:
                others = [f"{o['impl']} {ref_counted(o, lowered)}" for o in ranked if o is not c][:3]
                reason += f" (then {', '.join(others)})"
            passed = [o for o in ranked[ranked.index(c) + 1:] if id(o) in lowered and o["figure"] > c["figure"]]
            if passed:
                here, there = lowered[id(passed[0])][1:]
                reason += (f"; tile rounds counted at this shape: {passed[0]['impl']} measured {passed[0]['figure']:.1f}"
                           f" counts {lowered[id(passed[0])][0]:.1f}, its rounds filling {here:.0%} of the GPU here and"
                           f" {there:.0%} at {shape}")
            if refused:
                reason += f"; skipped {'; '.join(refused)}"
            return d.Choice(c["impl"], dict(c.get("params") or {}), reason, evidence,
                            f"{d.TABLE}: {table['gpu']}, {op} {dtype} {shape}{c_text}", tuple(refused), measured_out)
    fallback = d.KERNEL_FALLBACK.get(op) or d.LIBRARY[op]
    if accepts(fallback):
        fallback = d.LIBRARY[op]
    return d.Choice(fallback, {}, f"{where} for {op} {dtype}: the fallback ({fallback})", (), "fallback")


# --- the cases ---

def _same(new, ref):
    """Every field alike."""
    for name in ("impl", "params", "reason", "source", "skipped", "out_dtype"):
        assert getattr(new, name) == getattr(ref, name), name
    assert tuple(new.evidence) == ref.evidence and new.evidence == ref.evidence and new == ref


def _kinds():
    """(op, dtype, out) of every entry kind in the shipped tables."""
    kinds = set()
    for t in dispatch.tables()["gpus"]:
        for e in t["entries"]:
            kinds.add((e["op"], e["dtype"], dispatch.entry_out(e)))
    return sorted(kinds)


def _shapes(op, rng, count):
    if op == "reduce":
        return [(rng.choice([1, 3, 1000, 1 << 12, 1 << 20, (1 << 24) + 7, 1 << 28]) + rng.randrange(64),)
                for _ in range(count)]
    sizes = [8, 64, 100, 128, 256, 500, 512, 1000, 1024, 1500, 2048, 3000, 4096, 4224, 6144, 8192, 16384]
    shapes = []
    for _ in range(count):
        m, n, k = (rng.choice(sizes) + rng.choice([0, 0, 1, 8, -8, rng.randrange(300)]) for _ in range(3))
        shape = (max(m, 1), max(n, 1), max(k, 1))
        shapes.append(shape + (rng.choice([1, 2, 8]),) if op == "bgemm" else shape)
    return shapes


def _measured_shapes(op, dtype):
    """The tables' own shapes of that kind (refit leaves those as measured) and ones a row off."""
    shapes = set()
    for t in dispatch.tables()["gpus"]:
        for e in t["entries"]:
            if e["op"] == op and e["dtype"] == dtype:
                shapes.add(tuple(e["shape"]))
                if op != "reduce":
                    shapes.add((e["shape"][0] + 1,) + tuple(e["shape"][1:]))
    return sorted(shapes)


def _refusals(rng):
    """accepts functions: none refused, the library refused, a random third refused, all refused."""
    seen = {}

    def random_third(impl):
        if impl not in seen:
            seen[impl] = rng.random() < 0.35
        return "refused at random" if seen[impl] else ""

    return [lambda impl: "",
            lambda impl: "no library here" if impl in ("cublas", "cub") else "",
            random_third,
            lambda impl: "nothing runs"]


def _hashed_fill(salt):
    """A made-up model that lowers and reorders a lot: a kernel's fill from a hash of it and the
    shape, in (0.2, 1]; None for the libraries (no model), as round_fill gives."""
    def fill(impl, params, shape):
        if impl in ("cublas", "cub"):
            return None
        key = f"{salt}|{impl}|{sorted(params.items())}|{shape}".encode()
        return 0.2 + 0.8 * int.from_bytes(hashlib.blake2b(key, digest_size=4).digest(), "big") / 2 ** 32
    return fill


@pytest.mark.parametrize("op,dtype,out", _kinds())
def test_choose_chooses_what_it_chose_before(op, dtype, out):
    """The shipped tables, round_fill's model and the real refusals (plus made-up ones), over
    shapes at, near and far from the measured ones: the same choice, reason and evidence."""
    rng = random.Random(f"{op}{dtype}{out}")
    reordered = refused = 0
    shapes = _shapes(op, rng, 40) + _measured_shapes(op, dtype)
    for gpu, arch in GPUS:
        for dims in shapes:
            problem = core.make_problem(op, dtype, dims[:1] if op == "reduce" else dims, (False, False), out)
            real = lambda name: (candidates.refusal(op, name, problem, arch)  # noqa: E731
                                 or candidates.slow_path(op, name, problem))
            for accepts in [real] + _refusals(rng):
                fill = candidates.round_fill(op, problem)
                ref = ref_choose(op, dtype, dims, gpu, arch, accepts, out, fill)
                new = dispatch.choose(op, dtype, dims, gpu, arch, accepts, out, candidates.round_fill(op, problem))
                _same(new, ref)
                reordered += "tile rounds counted" in ref.reason or "(measured" in ref.reason
                refused += bool(ref.skipped)
    assert refused
    if op in ("hgemm",) and dtype in ("bf16", "fp16", "tf32"):
        assert reordered  # round_fill lowered some candidates here


@pytest.mark.parametrize("salt", range(3))
def test_choose_matches_under_a_model_that_reorders_everything(salt):
    """Every entry of both tables at random shapes, a made-up fill that lowers nearly every kernel
    by a different share: the same ranking (ties in the tables included), a prepared kernel moved
    before CUB alike."""
    rng = random.Random(salt)
    fill = _hashed_fill(salt)
    passed = 0
    for op, dtype, out in _kinds():
        for dims in _shapes(op, rng, 12) + _measured_shapes(op, dtype)[:6]:
            for gpu, arch in GPUS:
                for accepts in _refusals(rng):
                    ref = ref_choose(op, dtype, dims, gpu, arch, accepts, out, fill)
                    _same(dispatch.choose(op, dtype, dims, gpu, arch, accepts, out, fill), ref)
                    passed += "tile rounds counted" in ref.reason
    assert passed > 50


def _table(*entries):
    return {"gpus": [{"gpu": "G", "arch": "sm_90", "command": "c", "entries": list(entries)}]}


def _entry(op, shape, *cands):
    return {"op": op, "dtype": "bf16" if op == "hgemm" else "fp32", "shape": list(shape),
            "candidates": [{"impl": i, "figure": f, "params": p} for i, f, p in cands]}


def test_ties_unsorted_entries_and_cub_at_the_top(monkeypatch):
    """Made-up entries: equal figures (the first listed ranks first, lowered or not), an entry not
    listed fastest first, CUB at the top with a prepared kernel
    within its margin that refit lowers, or not, out of it."""
    entries = [
        _entry("hgemm", (64, 64, 64), ("k1", 500, {"X": 1}), ("k2", 500, {"X": 2}), ("cublas", 500, {}),
               ("k3", 499.5, {}), ("k4", 400, {})),
        _entry("sgemm", (64, 64, 64), ("k1", 100, {}), ("cublas", 300, {}), ("k2", 200, {}), ("k3", 250, {})),
        _entry("reduce", (64, 64, 64), ("cub", 1000, {}), ("cub2", 990, {}), ("k1", 980, {}), ("k2", 960, {}),
               ("k3", 940, {}), ("k4", 900, {})),
    ]
    monkeypatch.setattr(dispatch, "_tables", _table(*entries))
    rng = random.Random(7)
    for salt in range(40):
        fill = _hashed_fill(salt)
        for op, dtype in (("hgemm", "bf16"), ("sgemm", "fp32"), ("reduce", "fp32")):
            for dims in ((64, 64, 64), (65, 64, 64), (1000, 64, 64)):
                for accepts in _refusals(rng):
                    for f in (fill, None, lambda *a: None, lambda i, p, s: 1.0 if s == (64, 64, 64) else 0.5):
                        ref = ref_choose(op, dtype, dims, "G", "sm_90", accepts, "fp32", f)
                        _same(dispatch.choose(op, dtype, dims, "G", "sm_90", accepts, "fp32", f), ref)


def test_the_remembered_entries_follow_a_table_replaced_or_grown_and_a_replaced_aligned(monkeypatch):
    """choose remembers each table's entries of an op, type and C (dispatch._pool): a table
    replaced, or with an entry added, is read again, and so is every one where `aligned` is."""
    grown = _table(_entry("sgemm", (1024, 1024, 1024), ("cublas", 50.0, {}), ("k1", 40.0, {})),
                   _entry("sgemm", (1023, 1025, 1027), ("k2", 30.0, {}), ("cublas", 20.0, {})))
    monkeypatch.setattr(dispatch, "_tables", grown)
    calls = [("sgemm", "fp32", dims, "G", "sm_90") for dims in ((1024, 1024, 1022), (2048, 2048, 2048), (64, 64, 64))]
    for call in calls:
        _same(dispatch.choose(*call), ref_choose(*call))
    grown["gpus"][0]["entries"].append(_entry("sgemm", (64, 64, 64), ("k3", 9.0, {}), ("cublas", 8.0, {})))
    assert dispatch.choose(*calls[2]).impl == "k3"
    for call in calls:
        _same(dispatch.choose(*call), ref_choose(*call))
    monkeypatch.setattr(dispatch, "_tables", _table(_entry("sgemm", (64, 64, 64), ("k4", 9.0, {}))))
    assert dispatch.choose(*calls[2]).impl == "k4"
    monkeypatch.setattr(dispatch, "_tables", grown)
    monkeypatch.setattr(dispatch, "aligned", lambda op, dtype, shape: True)  # no alignment classes
    for call in calls:
        _same(dispatch.choose(*call), ref_choose(*call))
    assert "1024x1024x1024" in dispatch.choose(*calls[0]).source


def test_the_remembered_entries_follow_a_tables_entries_replaced_by_as_many(monkeypatch):
    """A table whose list of entries is replaced by another of the same length (an --update of
    one op's shapes, read into the same table) is read again: its length alone would not tell."""
    table = _table(_entry("sgemm", (64, 64, 64), ("k1", 9.0, {}), ("cublas", 8.0, {})))
    monkeypatch.setattr(dispatch, "_tables", table)
    call = ("sgemm", "fp32", (64, 64, 64), "G", "sm_90")
    assert dispatch.choose(*call).impl == "k1"
    table["gpus"][0]["entries"] = [_entry("sgemm", (64, 64, 64), ("k2", 9.0, {}), ("cublas", 8.0, {}))]
    assert dispatch.choose(*call).impl == "k2"
    _same(dispatch.choose(*call), ref_choose(*call))
