"""The interop example as a third-party project: built against the installed torch_npu.

    pip install --no-build-isolation .           # into an environment with torch_npu
    python setup.py build_ext --inplace          # or next to interop.py

Written as a setup.py for torch_npu is: NpuExtension gives the include and
library paths of the installed package (torch_npu's header layout, ACL's
acl/acl.h, -ltorch_npu).
"""

from setuptools import setup
from torch.utils.cpp_extension import BuildExtension

from torch_npu.utils.cpp_extension import NpuExtension

setup(
    name="npu_interop_example",
    version="0.1.0",
    ext_modules=[NpuExtension("npu_interop", ["npu_interop.cpp", "thirdparty.cpp"])],
    cmdclass={"build_ext": BuildExtension},
)
