"""Only the optional C extension lives here; everything else is in pyproject.toml.

``optional=True``: without a compiler (or Python headers) the build goes on without it and the
sampler reads in pure Python (see driple/collect/sampling/native.py).
"""
import sys

from setuptools import Extension, setup

ext = []
if sys.platform.startswith("linux"):
    ext.append(Extension(
        "driple.collect.sampling._fastread",
        ["driple/collect/sampling/_fastread.c"],
        optional=True,
    ))
setup(ext_modules=ext)
