"""juggle's C extensions, both optional (each has a pure-Python fallback):

- ``juggle.runtime._dispatch``: the compiled call path of juggle's proxies;
- ``juggle.fabric.linux._busguard``: register access under a SIGBUS guard (POSIX only; without
  it a bus error on a board's register window kills the process instead of raising).

Everything else about the package is declared in pyproject.toml."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension("juggle.runtime._dispatch", ["src/juggle/runtime/_dispatch.c"], optional=True),
        Extension(
            "juggle.fabric.linux._busguard",
            ["src/juggle/fabric/linux/_busguard.c"],
            optional=True,
        ),
    ]
)
