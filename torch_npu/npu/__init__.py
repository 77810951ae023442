"""``torch_npu.npu`` (also reachable as ``torch.npu``): devices, streams,
events, memory and random numbers of the simulated NPU."""

from typing import Any

from . import _gpu_trace  # noqa: F401  (torch.npu._gpu_trace: PyTorch's GPU trace calls it)
from . import _backends  # noqa: F401  (torch_npu.npu._backends.get_soc_version, imported by code for torch_npu)
from . import amp
from . import comm
from .autocast_utils import (
    get_amp_supported_dtype,
    get_autocast_dtype,
    is_autocast_enabled,
    is_bf16_supported,
    set_autocast_dtype,
    set_autocast_enabled,
)
from . import memory
from ._runtime_errors import NpuError, check_error
from .memory import (
    MemPool,
    OutOfMemoryError,
    caching_allocator_alloc,
    caching_allocator_delete,
    empty_cache,
    empty_virt_addr_cache,
    get_allocator_backend,
    get_per_process_memory_fraction,
    host_empty_cache,
    host_memory_stats,
    host_memory_stats_as_nested_dict,
    max_memory_allocated,
    max_memory_cached,
    max_memory_reserved,
    mem_get_info,
    memory_allocated,
    memory_cached,
    memory_reserved,
    memory_snapshot,
    memory_stats,
    memory_stats_as_nested_dict,
    memory_summary,
    reset_accumulated_host_memory_stats,
    reset_accumulated_memory_stats,
    reset_max_memory_allocated,
    reset_max_memory_cached,
    reset_peak_host_memory_stats,
    reset_peak_memory_stats,
    set_per_process_memory_fraction,
    use_mem_pool,
)
from .random import (
    _get_rng_state_offset,
    _set_rng_state_offset,
    default_generators,
    get_rng_state,
    get_rng_state_all,
    initial_seed,
    manual_seed,
    manual_seed_all,
    seed,
    seed_all,
    set_rng_state,
    set_rng_state_all,
)
from ._tensor_types import (
    BFloat16Tensor,
    BoolTensor,
    ByteTensor,
    CharTensor,
    DoubleTensor,
    FloatTensor,
    HalfTensor,
    IntTensor,
    LongTensor,
    ShortTensor,
)
from . import _storage_types
from ._storage_types import *  # noqa: F401,F403  (the legacy storages; listed in __all__ below)
from .streams import Event, ExternalEvent, ExternalStream, Stream, SyncLaunchStream
from .graphs import (
    NPUGraph,
    _launch_host_func,
    _launch_host_func_pending,
    _subscribe_report,
    _unsubscribe_report,
    graph,
    graph_pool_handle,
    make_graphed_callables,
    graph_task_group_begin,
    graph_task_group_end,
    graph_task_update_begin,
    graph_task_update_end,
    launch_callback,
    subscribe_report,
    super_kernel_scope_begin,
    super_kernel_scope_end,
    unsubscribe_report,
)
from . import aclnn
from ._backends import (
    enable_flash_sdp,
    enable_math_sdp,
    enable_mem_efficient_sdp,
    flash_sdp_enabled,
    math_sdp_enabled,
    mem_efficient_sdp_enabled,
    preferred_linalg_library,
    sdp_kernel,
)
from .deterministic import disable_deterministic_with_backward, enable_deterministic_with_backward
from .npu_config import (
    are_compatible_impl_enabled,
    get_device_limit,
    get_op_timeout_ms,
    set_device_limit,
    set_op_timeout_ms,
    use_compatible_impl,
)
from .utils import (
    StreamContext,
    can_device_access_peer,
    current_blas_handle,
    get_device_capability,
    init,
    _get_device_index,
    _sleep,
    current_device,
    current_stream,
    default_stream,
    device,
    device_count,
    device_of,
    get_device_name,
    get_device_properties,
    get_external_stream_mode,
    get_stream_limit,
    get_sync_debug_mode,
    host_sync_count,
    host_sync_stats,
    is_available,
    is_current_stream_capturing,
    is_initialized,
    npurt,
    reset_host_sync_stats,
    reset_stream_limit,
    set_device,
    set_external_stream_mode,
    set_stream,
    set_stream_limit,
    set_sync_debug_mode,
    stream,
    synchronize,
    utilization,
    _is_in_bad_fork,
    _lazy_init,
)
# Allocator additions of issue 12 (pluggable allocators), kept together.
from .memory import NPUPluggableAllocator, change_current_allocator  # noqa: E402
# torch_npu.npu.mstx is the marker class (its module of the same name is shadowed, as in torch_npu).
from .mstx import mstx  # noqa: E402

#: ``torch.npu.matmul.allow_hf32`` / ``torch.npu.conv.allow_hf32``: torch_npu's
#: HF32 switches (Note [HF32 switches] in npu_config.py).
matmul = npu_config._HF32Switch("matmul")
conv = npu_config._HF32Switch("conv")

__all__ = [
    "mstx",
    # npu_config (device core limits, op timeout, compatible implementations)
    "are_compatible_impl_enabled",
    "comm",
    "get_device_limit",
    "get_op_timeout_ms",
    "set_device_limit",
    "set_op_timeout_ms",
    "use_compatible_impl",
    # backend switches (HF32, attention, linear algebra, deterministic regions)
    "aclnn",
    "conv",
    "disable_deterministic_with_backward",
    "enable_deterministic_with_backward",
    "enable_flash_sdp",
    "enable_math_sdp",
    "enable_mem_efficient_sdp",
    "flash_sdp_enabled",
    "math_sdp_enabled",
    "matmul",
    "mem_efficient_sdp_enabled",
    "preferred_linalg_library",
    "sdp_kernel",
    # the rest
    "BFloat16Tensor",
    "BoolTensor",
    "ByteTensor",
    "CharTensor",
    "DoubleTensor",
    "FloatTensor",
    "HalfTensor",
    "IntTensor",
    "LongTensor",
    "ShortTensor",
    "Event",
    "ExternalEvent",
    "ExternalStream",
    "MemPool",
    "NPUGraph",
    "NpuError",
    "OutOfMemoryError",
    "Stream",
    "StreamContext",
    "SyncLaunchStream",
    "amp",
    "caching_allocator_alloc",
    "can_device_access_peer",
    "current_blas_handle",
    "get_device_capability",
    "init",
    "caching_allocator_delete",
    "check_error",
    "current_device",
    "current_stream",
    "default_generators",
    "default_stream",
    "device",
    "device_count",
    "device_of",
    "empty_cache",
    "empty_virt_addr_cache",
    "get_allocator_backend",
    "get_amp_supported_dtype",
    "get_autocast_dtype",
    "get_device_name",
    "get_device_properties",
    "get_external_stream_mode",
    "get_per_process_memory_fraction",
    "get_rng_state",
    "get_rng_state_all",
    "get_stream_limit",
    "get_sync_debug_mode",
    "graph",
    "graph_pool_handle",
    "graph_task_group_begin",
    "graph_task_group_end",
    "graph_task_update_begin",
    "graph_task_update_end",
    "host_empty_cache",
    "host_memory_stats",
    "host_memory_stats_as_nested_dict",
    "host_sync_count",
    "host_sync_stats",
    "initial_seed",
    "is_autocast_enabled",
    "is_available",
    "is_bf16_supported",
    "is_current_stream_capturing",
    "is_initialized",
    "launch_callback",
    "make_graphed_callables",
    "manual_seed",
    "manual_seed_all",
    "max_memory_allocated",
    "max_memory_cached",
    "max_memory_reserved",
    "mem_get_info",
    "memory_allocated",
    "memory_cached",
    "memory_reserved",
    "memory_snapshot",
    "memory_stats",
    "memory_stats_as_nested_dict",
    "memory_summary",
    "npurt",
    "reset_accumulated_host_memory_stats",
    "reset_accumulated_memory_stats",
    "reset_host_sync_stats",
    "reset_max_memory_allocated",
    "reset_max_memory_cached",
    "reset_peak_host_memory_stats",
    "reset_peak_memory_stats",
    "reset_stream_limit",
    "seed",
    "seed_all",
    "set_autocast_dtype",
    "set_autocast_enabled",
    "set_device",
    "set_external_stream_mode",
    "set_per_process_memory_fraction",
    "set_rng_state",
    "set_rng_state_all",
    "set_stream",
    "set_stream_limit",
    "set_sync_debug_mode",
    "stream",
    "subscribe_report",
    "super_kernel_scope_begin",
    "super_kernel_scope_end",
    "synchronize",
    "utilization",
    "unsubscribe_report",
    "use_mem_pool",
    # Allocator additions of issue 12 (pluggable allocators), kept together.
    "NPUPluggableAllocator",
    "change_current_allocator",
]
__all__ += _storage_types.__all__


def set_compile_mode(jit_compile: bool = True) -> None:
    r"""torch_npu's operator compile mode (JIT or binary kernels). The simulated NPU
    runs CPU kernels and has nothing to compile: accepted and ignored, so that
    torch_npu programs (and its graph tests) that set it run unchanged."""
    if not isinstance(jit_compile, bool):
        raise TypeError(f"jit_compile must be a bool, but got {type(jit_compile).__name__}")


def __getattr__(name: str) -> Any:
    # `torch.npu._initialized`, as `torch.cuda._initialized`: PyTorch reads it
    # to decide whether a device's state is worth saving (activation
    # checkpointing saves and restores the npu random state only if it is
    # true). Computed, so that it follows initialisation from C++ too.
    if name == "_initialized":
        return is_initialized()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
