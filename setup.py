"""Builds the Python package kiln: `pip install --no-build-isolation .` from the repository.

The extension kiln._kiln is a target of kiln's own CMake build (python/CMakeLists.txt): this
configures a build folder (build-pip/, or $KILN_PIP_BUILD_DIR) for the Python running pip,
builds that one target and copies it into the package; python/kiln/ holds the rest. Nothing is
downloaded: Debian's setuptools, wheel, pybind11 and CMake do it all (scripts/install-deps.sh).
Extra CMake arguments come from $CMAKE_ARGS (space-separated). The project's metadata is in
pyproject.toml. $KILN_PIP_PREBUILT names an extension a CMake build already made (build/python/
kiln/_kiln*.so), which is installed as it is instead: what the pip-install test uses, so that it
checks the packaging and the installed package without compiling kiln a second time.

The installed module compiles models at run time with the system compiler, as kiln-run does;
the kernel ABI header it pastes into generated code is built into it, so the checkout may be
moved or removed after installing.
"""
import os
import pathlib
import shutil
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = pathlib.Path(__file__).resolve().parent


class CMakeExtension(Extension):
    def __init__(self, name):
        super().__init__(name, sources=[])


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        target = pathlib.Path(self.get_ext_fullpath(ext.name))
        target.parent.mkdir(parents=True, exist_ok=True)
        prebuilt = os.environ.get("KILN_PIP_PREBUILT")
        if prebuilt:
            shutil.copyfile(prebuilt, target)
            return
        build_dir = pathlib.Path(os.environ.get("KILN_PIP_BUILD_DIR", ROOT / "build-pip"))
        configure = ["cmake", "-S", str(ROOT), "-B", str(build_dir), "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release",
                     "-DKILN_TESTS=OFF", "-DKILN_PYTHON=ON", f"-DPYTHON_EXECUTABLE={sys.executable}"]
        configure += os.environ.get("CMAKE_ARGS", "").split()
        subprocess.run(configure, check=True)
        subprocess.run(["cmake", "--build", str(build_dir), "--target", "_kiln", "-j", str(os.cpu_count() or 1)],
                       check=True)
        built = build_dir / "python" / "kiln" / pathlib.Path(self.get_ext_filename(ext.name)).name
        if not built.exists():
            raise RuntimeError(f"the CMake build wrote no {built}: see its warnings above (pybind11 or numpy missing?)")
        shutil.copyfile(built, target)


setup(
    ext_modules=[CMakeExtension("kiln._kiln")],
    cmdclass={"build_ext": CMakeBuild},
    # setuptools' own build folder defaults to build/, which is CMake's here.
    options={"build": {"build_base": str(ROOT / "build-pip" / "setuptools")}},
)
