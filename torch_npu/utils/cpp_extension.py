"""``torch_npu.utils.cpp_extension``: build C++ extensions against this package.

:func:`NpuExtension` is torch_npu's: a :class:`setuptools.Extension` with the
include and library paths of the installed torch_npu and torch, linking what a
torch_npu extension links (``c10``, ``torch``, ``torch_cpu``,
``torch_python``, ``torch_npu``). The headers are in torch_npu's layout
(``torch_npu/csrc/core/npu/NPUStream.h``, ...), the ACL API is
``acl/acl.h`` (also reachable as ``third_party/acl/inc/acl/acl.h``), and
``-ltorch_npu`` links the backend's libraries, ACL's (``libascendcl.so``)
included.
"""

import os
from typing import Any, List

import setuptools
import torch.utils.cpp_extension as TorchExtension

__all__ = ["NpuExtension", "PYTORCH_NPU_INSTALL_PATH", "include_paths", "library_paths"]

PYTORCH_NPU_INSTALL_PATH: str = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))


def include_paths() -> List[str]:
    r"""The include directories of the installed torch_npu (not torch's).

    Raises:
        RuntimeError: the package has no headers (an in-tree checkout that was
            never built): build it first (``make build`` or ``pip install .``).
    """
    include = os.path.join(PYTORCH_NPU_INSTALL_PATH, "include")
    if not os.path.isfile(os.path.join(include, "torch_npu", "csrc", "core", "npu", "NPUStream.h")):
        raise RuntimeError(
            f"torch_npu at {PYTORCH_NPU_INSTALL_PATH} has no C++ headers in {include}; "
            "build the package first (`make build`, or `pip install .`)"
        )
    return [include, os.path.join(include, "third_party", "acl", "inc")]


def library_paths() -> List[str]:
    r"""The library directory of the installed torch_npu (not torch's)."""
    return [os.path.join(PYTORCH_NPU_INSTALL_PATH, "lib")]


def NpuExtension(name: str, sources: List[str], *args: Any, **kwargs: Any) -> setuptools.Extension:
    r"""Creates a :class:`setuptools.Extension` for C++ code that uses torch_npu.

    As torch_npu's: every argument is forwarded to
    :class:`setuptools.Extension`, with the include directories, library
    directories and libraries of torch_npu and torch appended to those given.
    Build it with :class:`torch.utils.cpp_extension.BuildExtension`.

    Example::

        >>> from setuptools import setup
        >>> from torch.utils.cpp_extension import BuildExtension
        >>> from torch_npu.utils.cpp_extension import NpuExtension
        >>> setup(
        ...     name="extension",
        ...     ext_modules=[NpuExtension("extension", ["extension.cpp"])],
        ...     cmdclass={"build_ext": BuildExtension},
        ... )

    .. note::
        The extension finds the libraries at run time because ``import
        torch_npu`` has loaded them: import torch_npu before the extension.
    """
    kwargs["include_dirs"] = list(kwargs.get("include_dirs", [])) + include_paths() + TorchExtension.include_paths()
    kwargs["library_dirs"] = list(kwargs.get("library_dirs", [])) + library_paths() + TorchExtension.library_paths()
    kwargs["libraries"] = list(kwargs.get("libraries", [])) + ["c10", "torch", "torch_cpu", "torch_python", "torch_npu"]
    kwargs["language"] = "c++"
    return setuptools.Extension(name, sources, *args, **kwargs)
