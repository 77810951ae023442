"""Optional helpers of torch_npu (``torch_npu.contrib``): :mod:`.transfer_to_npu`."""

__all__: list = []
