"""Build of torch_npu (simulated NPU backend for PyTorch).

The native code is one CMake project (see CMakeLists.txt); this script drives
it. Install without build isolation so the build uses the torch==2.13.0 that
is already installed:

    pip install --no-build-isolation -e .
"""

import os
import subprocess
import sys

from setuptools import Extension, find_packages, setup
from setuptools.command.build_ext import build_ext

ROOT = os.path.dirname(os.path.abspath(__file__))


class CMakeBuild(build_ext):
    """Configures and builds the CMake project; CMake writes the extension and
    its libraries into torch_npu/ itself (in-tree), so editable installs work."""

    def build_extension(self, ext: Extension) -> None:
        build_dir = os.path.join(ROOT, "build")
        if not os.path.exists(os.path.join(build_dir, "build.ninja")):
            subprocess.check_call(
                [
                    "cmake", "-S", ROOT, "-B", build_dir, "-G", "Ninja",
                    "-DCMAKE_BUILD_TYPE=RelWithDebInfo",
                    f"-DPython3_EXECUTABLE={sys.executable}",
                ]
            )
        subprocess.check_call(["cmake", "--build", build_dir, "--target", "npu_python"])
        if not self.inplace:
            # A regular (non-editable) install: copy what CMake produced.
            import shutil

            out = os.path.dirname(self.get_ext_fullpath(ext.name))
            os.makedirs(os.path.join(out, "lib"), exist_ok=True)
            src_pkg = os.path.join(ROOT, "torch_npu")
            for name in os.listdir(src_pkg):
                if name.startswith("_C") and name.endswith(".so"):
                    shutil.copy2(os.path.join(src_pkg, name), self.get_ext_fullpath(ext.name))
            for name in os.listdir(os.path.join(src_pkg, "lib")):
                shutil.copy2(os.path.join(src_pkg, "lib", name), os.path.join(out, "lib", name))


setup(
    name="torch_npu_sim",
    version="0.1.0",
    description="torch_npu's stream and event system on a simulated NPU",
    packages=find_packages(include=["torch_npu", "torch_npu.*"]),
    ext_modules=[Extension("torch_npu._C", sources=[])],
    cmdclass={"build_ext": CMakeBuild},
    python_requires=">=3.10",
    install_requires=["torch==2.13.0"],
    zip_safe=False,
    # PyTorch's device-backend autoload: `import torch` imports torch_npu and
    # calls torch_npu._autoload() (TORCH_DEVICE_BACKEND_AUTOLOAD=0 turns it
    # off). Takes effect once the package is installed (`make install`).
    entry_points={"torch.backends": ["torch_npu = torch_npu:_autoload"]},
)
