"""NPUGraph.super_kernel_optimize: torch_npu's option checks, refused before a
capture succeeded, and replays unchanged after it (the simulator fuses only
super-kernel scopes; docs/GRAPHS.md)."""

import pytest
import torch

ALL_OPTIMIZE = {
    "preload_code": 1, "split_mode": 2, "stream_fusion": 1, "constant_codegen": 1,
    "auto_op_parallel": 1, "early_start": 1, "opt_extend": "x=1",
    "dcci_before_kernel_start": ["mm"], "dcci_after_kernel_end": [], "dcci_disable_on_kernel": ["add"],
    "ubuf_lock_ignore_kernel": [],
    "aggressive_opt_strategies": {"event_breaker_bypass": 1, "value_breaker_bypass": 0, "task_breaker_bypass": 1},
}
ALL_DEBUG = {"debug_sync_all": 1, "debug_op_exec_trace": 0, "debug_cross_core_sync_check": 1,
             "debug_per_op_max_core_num": 4, "debug_extend": "y"}


def captured_linear():
    model = torch.nn.Linear(16, 16).npu()
    x = torch.randn(4, 16, device="npu")
    graph = torch.npu.NPUGraph()
    with torch.npu.graph(graph):
        y = torch.relu(model(x))
    return graph, y, lambda: torch.relu(model(x))


def test_every_option_is_accepted_and_replays_are_unchanged():
    graph, y, eager = captured_linear()
    graph.super_kernel_optimize(optimize_options=ALL_OPTIMIZE, debug_options=ALL_DEBUG)
    graph.super_kernel_optimize()
    graph.replay()
    torch.npu.synchronize()
    assert torch.equal(y.cpu(), eager().cpu())


@pytest.mark.parametrize(
    "optimize, debug, message",
    [
        ("invalid", None, "optimize_options param must be dict or None."),
        (None, [1], "debug_options param must be dict or None."),
        ({"debug_sync_all": 1}, None, "Invalid optimize_options param key: 'debug_sync_all'."),
        (None, {"stream_fusion": 1}, "Invalid debug_options param key: 'stream_fusion'."),
        ({"preload_code": "1"}, None, r"optimize_options param\['preload_code'\] must be int, got str"),
        ({"opt_extend": 1}, None, r"optimize_options param\['opt_extend'\] must be str, got int"),
        (None, {"debug_extend": None}, r"debug_options param\['debug_extend'\] must be str, got NoneType"),
        ({"dcci_before_kernel_start": ("mm",)}, None,
         r"optimize_options param\['dcci_before_kernel_start'\] must be list, got tuple"),
        ({"ubuf_lock_ignore_kernel": ["a", 3]}, None,
         r"optimize_options\['ubuf_lock_ignore_kernel'\]\[1\] must be str, got int"),
        ({"aggressive_opt_strategies": {"bypass_all": 1}}, None,
         r"Invalid sub_key 'bypass_all' in optimize_options\['aggressive_opt_strategies'\]."),
        ({"aggressive_opt_strategies": {"task_breaker_bypass": 1.0}}, None,
         r"optimize_options\['aggressive_opt_strategies'\]\['task_breaker_bypass'\] must be int, got float"),
    ],
)
def test_bad_options_are_refused_naming_them(optimize, debug, message):
    graph, y, _ = captured_linear()
    with pytest.raises(RuntimeError, match=message):
        graph.super_kernel_optimize(optimize_options=optimize, debug_options=debug)
    graph.replay()  # the graph is still usable
    torch.npu.synchronize()


def test_refused_without_a_successful_capture():
    message = "Called NPUGraph::super_kernel_optimize without a preceding successful capture."
    with pytest.raises(RuntimeError, match=message):
        torch.npu.NPUGraph().super_kernel_optimize()
    graph, _, _ = captured_linear()
    graph.reset()
    with pytest.raises(RuntimeError, match=message):
        graph.super_kernel_optimize({"stream_fusion": 1})
