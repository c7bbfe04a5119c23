"""kafka-python's package, entered without running its ``__init__`` until something asks for it.

``kafka/__init__.py`` imports kafka-python's admin client, consumer and producer (about 40 ms of every
command's start, a fifth of the client's import); the wire uses only its protocol and network
modules, which import none of those. :func:`defer_package_init` puts the package in ``sys.modules``
unexecuted: its submodules import as usual, and the first read of any other name of the package
(``from kafka import KafkaProducer``, ``kafka.__version__``) runs the real ``__init__`` then, so code
beside kafkatxn in the same process (tests, a Spark job) sees the package it expects.
"""

from __future__ import annotations

import importlib
import importlib.util
import logging
import sys
import types


def defer_package_init() -> None:
    """Register kafka-python's package with its ``__init__`` deferred (a no-op once it is imported)."""
    if "kafka" in sys.modules:
        return
    spec = importlib.util.find_spec("kafka")
    if spec is None or spec.loader is None or spec.submodule_search_locations is None:
        return  # not installed as a package: the import error comes where the client is used
    package = importlib.util.module_from_spec(spec)

    def __getattr__(name: str) -> object:  # PEP 562: read for names the module lacks
        if not name.startswith("__"):
            try:
                submodule = importlib.util.find_spec(f"kafka.{name}")
            except (ImportError, ValueError):
                submodule = None
            if submodule is not None:  # `from kafka import errors`: the submodule, without the rest
                return importlib.import_module(f"kafka.{name}")
        _run_init(package)
        try:
            return package.__dict__[name]
        except KeyError:
            raise AttributeError(f"module 'kafka' has no attribute {name!r}") from None

    package.__getattr__ = __getattr__  # type: ignore[attr-defined]
    sys.modules["kafka"] = package
    # What __init__ does first, kept at once: kafka-python's loggers never reach Python's last resort.
    logging.getLogger("kafka").addHandler(logging.NullHandler())


def _run_init(package: types.ModuleType) -> None:
    """Run the real ``kafka/__init__.py`` in the registered package, once."""
    if package.__dict__.pop("__getattr__", None) is None:
        return  # running or ran already
    package.__spec__.loader.exec_module(package)  # type: ignore[union-attr]
