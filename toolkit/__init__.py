"""ARI Bench toolkit: run sandboxed agent sessions, grade bundles, publish results."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("ari-bench-toolkit")
except PackageNotFoundError:  # running from a source tree that was not installed
    __version__ = "0.0.0+unknown"
