"""Build of torch_npu (simulated NPU backend for PyTorch).

The native code is one CMake project (see CMakeLists.txt); this script drives
it. Build without build isolation so the build uses the torch==2.13.0 that is
already installed:

    pip install --no-build-isolation .        # a regular install (a wheel)
    pip wheel --no-build-isolation --no-deps .
    pip install --no-build-isolation -e .     # editable, for development

A regular install or wheel is relocatable (Note [Relocatable package] in
CMakeLists.txt): every native library, the C++ headers (torch_npu/include) and
the ACL API are inside the package, with RUNPATHs relative to it, so it works
once the source and build trees are gone. An editable install uses the
in-tree build (build/, libraries in torch_npu/).
"""

import os
import shutil
import subprocess
import sys

from setuptools import Extension, find_packages, setup
from setuptools.command.build_ext import build_ext
from setuptools.command.build_py import build_py

ROOT = os.path.dirname(os.path.abspath(__file__))
BASE_VERSION = "0.1.0+sim"  # also in torch_npu/version.py


def git_revision() -> str:
    """The commit being built, or "unknown" outside a git checkout."""
    try:
        return subprocess.check_output(
            ["git", "rev-parse", "HEAD"], cwd=ROOT, stderr=subprocess.DEVNULL, text=True
        ).strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


GIT_REVISION = git_revision()
VERSION = BASE_VERSION if GIT_REVISION == "unknown" else f"{BASE_VERSION}.g{GIT_REVISION[:9]}"


def tool(name: str) -> str:
    """A build tool: the one installed beside this Python (the project's venv) first."""
    return shutil.which(name, path=os.path.dirname(sys.executable)) or shutil.which(name) or name


class BuildPy(build_py):
    """Copies the Python sources, with the version of this build in version.py."""

    def run(self) -> None:
        super().run()
        if self.editable_mode:
            return  # the source tree's version.py is the one imported
        path = os.path.join(self.build_lib, "torch_npu", "version.py")
        with open(path, "w", encoding="utf-8") as f:
            f.write('"""Version of this build of torch_npu (written by setup.py)."""\n\n')
            f.write('__all__ = ["__version__", "git_version"]\n\n')
            f.write(f"__version__: str = {VERSION!r}\n")
            f.write(f"git_version: str = {GIT_REVISION!r}\n")


class CMakeBuild(build_ext):
    """Configures and builds the CMake project.

    Editable (or --inplace): CMake writes the extension and its libraries into
    the source tree's torch_npu/, from build/. Regular: a separate build tree,
    build-wheel/, writes them straight into the package being built
    (build_lib/torch_npu), with relative RUNPATHs and without the tests,
    benchmarks and examples.
    """

    def run(self) -> None:
        # setuptools clears `inplace` while it builds and copies the results
        # into the source tree afterwards: remember what was asked.
        self.in_tree = bool(self.inplace or self.editable_mode)
        super().run()

    def build_extension(self, ext: Extension) -> None:
        if self.in_tree:
            build_dir = os.path.join(ROOT, "build")
            options = []
        else:
            build_dir = os.path.join(ROOT, "build-wheel")
            package_dir = os.path.abspath(os.path.dirname(self.get_ext_fullpath(ext.name)))
            options = [
                f"-DNPU_PACKAGE_DIR={package_dir}",
                "-DNPU_RELOCATABLE=ON",
                "-DNPU_BUILD_TESTS=OFF",
                "-DNPU_BUILD_BENCHMARKS=OFF",
                "-DNPU_BUILD_EXAMPLES=OFF",
            ]
        configured = os.path.exists(os.path.join(build_dir, "build.ninja"))
        if not configured or options:
            ninja = tool("ninja")
            subprocess.check_call(
                [
                    tool("cmake"), "-S", ROOT, "-B", build_dir, "-G", "Ninja",
                    "-DCMAKE_BUILD_TYPE=RelWithDebInfo",
                    f"-DPython3_EXECUTABLE={sys.executable}",
                    *([f"-DCMAKE_MAKE_PROGRAM={ninja}"] if os.path.isabs(ninja) else []),
                    *options,
                ]
            )
        subprocess.check_call([tool("cmake"), "--build", build_dir, "--target", "npu_python"])
        if self.in_tree:
            # setuptools copies build_lib's extension back into the tree: make it the tree's.
            built = os.path.join(ROOT, "torch_npu", os.path.basename(self.get_ext_fullpath(ext.name)))
            os.makedirs(os.path.dirname(self.get_ext_fullpath(ext.name)), exist_ok=True)
            shutil.copy2(built, self.get_ext_fullpath(ext.name))


setup(
    name="torch_npu_sim",
    version=VERSION,
    description="torch_npu's stream and event system on a simulated NPU",
    packages=find_packages(include=["torch_npu", "torch_npu.*"]),
    ext_modules=[Extension("torch_npu._C", sources=[])],
    cmdclass={"build_ext": CMakeBuild, "build_py": BuildPy},
    python_requires=">=3.10",
    install_requires=["torch==2.13.0"],
    zip_safe=False,
    # PyTorch's device-backend autoload: `import torch` imports torch_npu and
    # calls torch_npu._autoload() (TORCH_DEVICE_BACKEND_AUTOLOAD=0 turns it
    # off). Takes effect once the package is installed (`make install`).
    entry_points={"torch.backends": ["torch_npu = torch_npu:_autoload"]},
)
