"""What the hgemm GPU test modules share: one failure list for a verify sweep, and the skips for
a baseline that is missing here or a Hopper-only rung on another GPU."""
import pytest


def assert_all_pass(results):
    bad = [f"{r.impl} {r.problem.shape} {r.problem.layout} C {r.problem.out_dtype} a={r.problem.alpha} "
           f"b={r.problem.beta}: {r.status} {r.reason}" for r in results if r.status != "PASS"]
    assert not bad, "\n".join(bad)


def hopper() -> bool:
    from gemmlab.cuda.device import info

    return info().arch == "sm_90"


def skip_unavailable(impl):
    if impl.kind == "baseline" and impl.unavailable_reason():
        pytest.skip(impl.unavailable_reason())
    if getattr(impl, "arch", None) == "sm_90a" and not hopper():
        pytest.skip(f"{impl.name} needs sm_90a (Hopper)")


# The three checks every rung-5 configuration module runs (clusters, tile shapes, consumers): each
# takes the kernel, its parameters and the module's edge shapes.
ODD_SHAPES = ((136, 264, 1000), (129, 257, 650))
SLICED_SHAPES = ((512, 512, 8192), (1409, 1665, 203), (3072, 3072, 1024))


def check_sweeps(impl, dtype, params, edge_shapes):
    """The odd and aligned sweeps and the module's edge shapes, nn, fp32 C."""
    from gemmlab.harness.bench import verify_sweep
    from gemmlab.ops import hgemm_check as hv

    problems = hv.sweep_problems(dtype, hv.SWEEP_SHAPES + hv.ALIGNED_SHAPES + edge_shapes)
    assert_all_pass(verify_sweep([impl], problems, {impl.name: params}))


def check_layout_and_c_type(impl, layout, out, params, edge_shapes):
    """Both 16-bit types in one layout with an fp32 C or ("c16") a C in the input type."""
    from gemmlab.harness.bench import verify_sweep
    from gemmlab.ops import hgemm_check as hv

    problems = [p for d in ("fp16", "bf16") for p in hv.sweep_problems(d, ODD_SHAPES + edge_shapes, layout=layout,
                                                                       out=d if out == "c16" else "fp32")]
    assert_all_pass(verify_sweep([impl], problems, {impl.name: params}))


def check_layout_unless_refused(impl, layout, out, params, edge_shapes):
    """check_layout_and_c_type, skipped with the spec's reason where `params` cannot read the
    layout (an M-major A shared along N needs 128-row tiles)."""
    refused = impl.failed_constraints({**impl.defaults, **params, "A_MNMAJOR": int(layout[0] == "t")})
    if refused:
        pytest.skip(f"the spec refuses it: {refused[0]}")
    check_layout_and_c_type(impl, layout, out, params, edge_shapes)


def check_k_slices(impl, params):
    """Both 16-bit types with the K slices `params` asks for (SPLITK, TAILK) on few-tile, odd and
    partial-wave shapes."""
    from gemmlab.harness.bench import verify_sweep
    from gemmlab.ops import hgemm_check as hv

    problems = [p for d in ("fp16", "bf16") for p in hv.sweep_problems(d, SLICED_SHAPES)]
    assert_all_pass(verify_sweep([impl], problems, {impl.name: params}))


K_SLICES = [{"SPLITK": 4}, {"SPLITK": 0}, {"TAILK": 2}]


def configuration_tests(impl, configs, edge_shapes, sliced=None):
    """The three tests of a rung-5 configuration module, parametrized over its `configs` (name ->
    parameters): the sweeps in both 16-bit types, every layout with both C types, and the K slices
    (for the configurations named in `sliced`, all by default). A module binds them to test_ names."""

    @pytest.mark.parametrize("config", configs, ids=str)
    @pytest.mark.parametrize("dtype", ("fp16", "bf16"))
    def sweeps(dtype, config):
        skip_unavailable(impl)
        check_sweeps(impl, dtype, configs[config], edge_shapes)

    @pytest.mark.parametrize("config", configs, ids=str)
    @pytest.mark.parametrize("layout", ("nt", "tn", "tt"))
    @pytest.mark.parametrize("out", ("fp32", "c16"))
    def layouts(layout, out, config):
        skip_unavailable(impl)
        check_layout_unless_refused(impl, layout, out, configs[config], edge_shapes)

    @pytest.mark.parametrize("config", list(sliced or configs), ids=str)
    @pytest.mark.parametrize("extra", K_SLICES, ids=str)
    def k_slices(extra, config):
        skip_unavailable(impl)
        check_k_slices(impl, {**configs[config], **extra})

    return sweeps, layouts, k_slices
