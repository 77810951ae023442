"""Version of the package. ``+sim``: torch_npu's API on the simulated NPU, not Huawei's torch_npu.

A wheel build (setup.py) rewrites this file in the wheel with the commit it was built from.
"""

__all__ = ["__version__", "git_version"]

__version__: str = "0.1.0+sim"
git_version: str = "unknown"
