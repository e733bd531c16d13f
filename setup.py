"""Build of pairedge's one C extension; everything else is in pyproject.toml.

``pairedge.core.features._pairkernel`` (``sdk/core/features/_pairkernel.c``) is the compiled pair block of the
feature spec. It is *optional*: where no C compiler is present the install still succeeds and the runtime uses
the numpy implementation, with the same values (``pairedge doctor`` says which one is in use).
"""

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

# No fused multiply-add: the kernel's products must round as numpy's do (its values equal the numpy ones).
UNIX_FLAGS = ["-O3", "-ffp-contract=off", "-fno-math-errno", "-std=c99"]


class BuildExt(build_ext):
    """Adds the flags of the compiler family in use (``-ffp-contract=off`` on gcc / clang; MSVC does not
    contract floating-point expressions without /fp:fast)."""

    def build_extensions(self) -> None:
        if self.compiler.compiler_type == "unix":
            for ext in self.extensions:
                ext.extra_compile_args = [*ext.extra_compile_args, *UNIX_FLAGS]
        super().build_extensions()


setup(
    ext_modules=[
        Extension(
            "pairedge.core.features._pairkernel",
            sources=["sdk/core/features/_pairkernel.c"],
            optional=True,  # no compiler: the numpy implementation is used
        )
    ],
    cmdclass={"build_ext": BuildExt},
)
