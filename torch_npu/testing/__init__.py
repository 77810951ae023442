"""Test helpers for code written against torch_npu (``torch_npu.testing``)."""
