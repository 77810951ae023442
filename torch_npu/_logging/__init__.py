"""torch_npu's logging: its log names in ``torch._logging`` and their levels in C++.

``import torch_npu`` registers torch_npu's logs with ``torch._logging``
(``memory``, ``dispatch``, ``dispatch_time``, ``env``, ``acl``, ``npugraph``,
``aclgraph``), reads ``TORCH_NPU_LOGS`` (the syntax of ``TORCH_LOGS``, e.g.
``TORCH_NPU_LOGS="+memory,dispatch"``) and makes ``torch._logging.set_logs``
pass its settings on to the C++ loggers (``torch_npu._C._logging``). The C++
loggers write to stderr in torch_npu's format; ``TORCH_NPU_LOGS_FILTER``
(``+word`` keeps, ``-word`` drops) filters their lines. See docs/LOGGING.md.
"""

__all__: list[str] = []
