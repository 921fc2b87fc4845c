"""The compiled call path of juggle's proxies (optional: the pure-Python path is the fallback).

Everything else about the package is declared in pyproject.toml."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension("juggle.runtime._dispatch", ["src/juggle/runtime/_dispatch.c"], optional=True)
    ]
)
