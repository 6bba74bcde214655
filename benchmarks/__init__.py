"""The benchmark scripts (run as ``python benchmarks/X.py``, not imported as a package).

A package only so that the tests can import the one nginx launcher as
``benchmarks.nginx_origin`` (pytest's ``pythonpath = ["."]`` in pyproject.toml) without a
same-named module elsewhere on sys.path shadowing it; ``benchmarks.slowing_origin`` likewise.
"""
