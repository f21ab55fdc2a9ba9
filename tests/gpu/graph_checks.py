"""What the graph tests share (test_graph_replay.py, test_launch_graph.py): seeded inputs, the
error against an fp64 reference, and a user's torch.cuda.graph capture of one call."""
import torch


def rand(*shape, seed, dtype=None):
    g = torch.Generator(device="cuda").manual_seed(seed)
    x = torch.rand(shape, device="cuda", generator=g) - 0.5
    return x if dtype is None else x.to(dtype)


def rel_err(c, ref):
    return float(torch.linalg.norm(c.double() - ref) / torch.linalg.norm(ref))


def capture_on_side_stream(fn):
    """A torch.cuda.CUDAGraph recording fn() on a side stream (torch's default global mode)."""
    graph, side = torch.cuda.CUDAGraph(), torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        with torch.cuda.graph(graph, stream=side):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    return graph


def calls_on_a_busy_side_stream(a, c, call, steps: int = 3):
    """call(side) three times on a side stream, each after the stream was kept busy (~25 ms) and
    then negated A and poisoned C: work not ordered after them on that stream would read the old
    A, or be overwritten by the fill, and fail the caller's check of C."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(steps):
            c.fill_(float("nan"))
            torch.cuda._sleep(50_000_000)
            a.mul_(-1.0)
            call(side)
    side.synchronize()
