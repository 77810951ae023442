"""Inductor's device op overrides for npu: the lines of Python its wrapper code
writes for device guards, synchronization and raw streams."""

from torch._inductor.codegen.common import DeviceOpOverrides, register_device_op_overrides

__all__ = ["NpuDeviceOpOverrides"]


class NpuDeviceOpOverrides(DeviceOpOverrides):
    r"""What Inductor's Python wrapper writes for npu (``torch.npu`` calls)."""

    def import_get_raw_stream_as(self, name: str) -> str:
        return f"from torch_npu._C import _npu_getCurrentRawStream as {name}"

    def set_device(self, device_idx: int) -> str:
        return f"torch.npu.set_device({device_idx})"

    def synchronize(self) -> str:
        return "torch.npu.synchronize()"

    def device_guard(self, device_idx: int) -> str:
        return f"torch.npu.device({device_idx})"

    def cpp_kernel_type(self) -> str:
        return "void*"


register_device_op_overrides("npu", NpuDeviceOpOverrides())
