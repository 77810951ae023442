"""``torch.compile(backend="npugraphs")``: torch_npu's Dynamo backend that
replays each compiled graph as an NPU graph.

AOTAutograd splits the Dynamo graph into forward and backward graphs (or one
inference graph); each runs its ATen ops eagerly, inside an
:class:`~torch_npu.npu._graph_runner.NPUGraphRunner` that records it once per
call signature and replays it afterwards (Note [Compiled functions replayed as
NPU graphs] in ``torch_npu/npu/_graph_runner.py``). The forward's parameters
and buffers are static arguments (not copied); everything else, the
backward's saved activations included, is copied into the recording's
placeholders at each replay.
"""

from typing import Any, Callable, List, Sequence

import torch

from ..npu._graph_runner import NPUGraphRunner, graph_options

__all__ = ["npugraphs", "register_npugraphs_backend"]


def _runner(gm: torch.fx.GraphModule, static_input_idxs: Sequence[int], name: str) -> NPUGraphRunner:
    from torch._functorch.aot_autograd import make_boxed_func

    return NPUGraphRunner(make_boxed_func(gm.forward), static_input_idxs, name=name,
                          **graph_options(gm))


def npugraphs(gm: torch.fx.GraphModule, example_inputs: List[Any]) -> Callable[..., Any]:
    r"""The ``npugraphs`` backend: AOTAutograd, then NPU graphs for every graph."""
    from torch._dynamo.backends.common import aot_autograd
    from torch._inductor.compile_fx import get_static_input_idxs
    from torch._inductor.utils import num_fw_fixed_arguments

    num_dynamo_inputs = len(example_inputs)

    def forward(aot_gm: torch.fx.GraphModule, aot_inputs: List[Any], is_inference: bool = False) -> Any:
        fixed = num_fw_fixed_arguments(num_dynamo_inputs, len(aot_inputs))
        name = "the inference graph" if is_inference else "the forward graph"
        return _runner(aot_gm, get_static_input_idxs(fixed), name)

    def backward(aot_gm: torch.fx.GraphModule, aot_inputs: List[Any]) -> Any:
        # Saved activations change address between calls here (no shared pool):
        # nothing in a backward is static.
        return _runner(aot_gm, (), "the backward graph")

    def inference(aot_gm: torch.fx.GraphModule, aot_inputs: List[Any]) -> Any:
        return forward(aot_gm, aot_inputs, is_inference=True)

    return aot_autograd(fw_compiler=forward, bw_compiler=backward,
                        inference_compiler=inference)(gm, example_inputs)


def register_npugraphs_backend() -> None:
    r"""Register ``npugraphs`` with Dynamo (idempotent; needs ``torch._dynamo``)."""
    from torch._dynamo.backends.registry import _COMPILER_FNS, register_backend

    if "npugraphs" not in _COMPILER_FNS:
        register_backend(name="npugraphs", compiler_fn=npugraphs)
