"""kafka-python's packages, entered without running their ``__init__`` until something asks for it.

``kafka/__init__.py`` imports kafka-python's admin client, consumer and producer (about 40 ms of every
command's start, a fifth of the client's import); the wire uses only its protocol and network
modules, which import none of those. Three of its protocol packages, ``kafka.protocol.admin``,
``.consumer`` and ``.producer``, import every API module of their family in their ``__init__``
(each module builds its request and response classes from Kafka's JSON schemas: ``admin`` alone is
~30 ms), where a command sends a few of those APIs and the wire imports each API's own module. The
network package ``kafka.net`` and the metrics packages its connections import, ``kafka.metrics`` and
``.stats``, likewise (their proxies, compat client, sensors and reporters: the wire gives the manager no metrics).
:func:`defer_package_init` puts each of these packages in ``sys.modules`` unexecuted: their submodules
import as usual, and the first read of any other name of a package (``from kafka import
KafkaProducer``, ``kafka.__version__``, ``from kafka.protocol.admin import *``) runs the real
``__init__`` then, so code beside kafkatxn in the same process (tests, a Spark job) sees the package
it expects. The few names kafka-python's own modules on the wire's path read from a deferred package
(``DEFERRED``: ``kafka.protocol.broker_version_data``, imported by ``kafka.net.connection``, reads
``ListGroupsRequest`` and ``OffsetFetchRequest``; ``kafka.net.metrics``, four stats) are served from
the submodule that defines them. The SASL package ``kafka.net.sasl``, whose ``__init__`` imports every
mechanism (GSSAPI's, AWS MSK's with ``hashlib`` and ``hmac``: ~12 M instructions before the first
request), is deferred too: ``kafka.net.connection`` imports its ``get_sasl_mechanism``, defined by that
``__init__``, and calls it at a SASL login only, so it is served a stand-in that runs the ``__init__``
at its first call (``CALLED_LATER``). ``broker_version_data`` reads ``ListGroupsRequest`` and
``OffsetFetchRequest`` only to make two requests of ``VERSION_CHECKS``, the probes of a broker older than
ApiVersions (0.10) that no module of kafka-python sends; their modules build every group API's classes
(25 M instructions, ~7 ms of every command's start before its first request). So that module alone is
served stand-ins for them (``MADE_LATER``): its two requests are made, from the real classes, when first
read (:class:`_RequestLater`).
"""

from __future__ import annotations

import importlib
import importlib.util
import logging
import sys
import types
from typing import Any

# Each deferred package, parents first, with the names read from it by kafka-python's own modules that
# the wire imports, mapped to the submodule defining each (tests/unit/test_wire_contract.py checks
# that the package's __init__ binds the same object).
DEFERRED: dict[str, dict[str, str]] = {
    "kafka": {},
    "kafka.net": {},
    "kafka.metrics": {},
    "kafka.metrics.stats": {"Avg": "avg", "Count": "count", "Max": "max_stat", "Rate": "rate"},
    "kafka.protocol.admin": {"ListGroupsRequest": "groups"},
    "kafka.protocol.consumer": {"OffsetFetchRequest": "group"},
    "kafka.protocol.producer": {},
    "kafka.net.sasl": {},
}
# Functions a deferred package's own __init__ defines that kafka-python's modules on the wire's path
# import at once and call only later: served as a stand-in (:func:`_called_later`).
CALLED_LATER: dict[str, tuple[str, ...]] = {"kafka.net.sasl": ("get_sasl_mechanism",)}
# Names of a deferred package (its DEFERRED names) that the module reading them (the key) only makes
# requests of, never sends: it is served a stand-in that makes them when they are first read.
MADE_LATER: dict[str, frozenset[str]] = {"kafka.protocol.broker_version_data": frozenset({"ListGroupsRequest", "OffsetFetchRequest"})}
# Modules (not packages) registered unexecuted too: the modules on the wire's path (the inner keys) import
# these names of them at once and call them only later, or never: the metrics the wire gives kafka-python
# none of, the SASL login's requests (built from their schemas at import: 6.6 M instructions before every
# command's first request). Those readers are served stand-ins (:func:`_called_later`); any other read of
# the module runs it, so code beside kafkatxn gets its own names.
DEFERRED_MODULES: dict[str, dict[str, tuple[str, ...]]] = {
    "kafka.net.metrics": {"kafka.net.connection": ("KafkaConnectionMetrics",), "kafka.net.manager": ("KafkaManagerMetrics",)},
    "kafka.protocol.sasl": {"kafka.net.connection": ("SaslAuthenticateRequest", "SaslHandshakeRequest", "SaslBytesRequest")},
}


def defer_package_init() -> None:
    """Register kafka-python's packages with their ``__init__`` deferred (a no-op for one already imported)."""
    for name, names in DEFERRED.items():
        if _defer(name, names) and name == "kafka":
            # What __init__ does first, kept at once: kafka-python's loggers never reach Python's last resort.
            logging.getLogger("kafka").addHandler(logging.NullHandler())
    for name in DEFERRED_MODULES:
        _defer(name, {})


def _defer(name: str, names: dict[str, str]) -> bool:
    """Register the package ``name`` (or the module, one of DEFERRED_MODULES) unexecuted; False if it is
    imported already or not installed."""
    if name in sys.modules:
        return False
    try:
        spec = importlib.util.find_spec(name)  # imports the parents: kafka (deferred), kafka.protocol
    except (ImportError, ValueError):
        return False
    is_package = spec is not None and spec.submodule_search_locations is not None
    if spec is None or spec.loader is None or not (is_package or name in DEFERRED_MODULES):
        return False  # not installed as a package: the import error comes where the client is used
    package = importlib.util.module_from_spec(spec)
    stand_ins = {attr: _called_later(package, attr) for attr in CALLED_LATER.get(name, ())}
    readers = DEFERRED_MODULES.get(name, {})
    served: dict[str, Any] = {}  # stand-ins for those readers only

    def __getattr__(attr: str) -> object:  # PEP 562: read for names the module lacks
        if attr in stand_ins:
            return stand_ins[attr]
        if not is_package:
            if attr == "__path__":  # asked by every `from module import name`: a module has none
                raise AttributeError(attr)
            if attr in readers.get(_reader(), ()):
                return served.setdefault(attr, _called_later(package, attr))
        elif not attr.startswith("__"):
            submodule_name = names.get(attr)
            if submodule_name is not None:  # a name kafka-python's own modules read: from its submodule
                if attr in MADE_LATER.get(_reader(), ()):
                    return _RequestLater(f"{name}.{submodule_name}", attr)
                return getattr(importlib.import_module(f"{name}.{submodule_name}"), attr)
            try:
                submodule = importlib.util.find_spec(f"{name}.{attr}")
            except (ImportError, ValueError):
                submodule = None
            if submodule is not None:  # `from kafka import errors`: the submodule, without the rest
                return importlib.import_module(f"{name}.{attr}")
        _run_init(package)
        try:
            return package.__dict__[attr]
        except KeyError:
            raise AttributeError(f"module {name!r} has no attribute {attr!r}") from None

    package.__getattr__ = __getattr__  # type: ignore[attr-defined]
    sys.modules[name] = package
    parent, _, child = name.rpartition(".")
    if parent:  # as the import system binds a submodule it loads on its package
        setattr(sys.modules[parent], child, package)
    return True


def _called_later(package: types.ModuleType, attr: str) -> Any:
    """A stand-in for the function ``attr`` that ``package``'s own ``__init__`` defines: its first call
    runs that ``__init__``, and every call is the real function's."""

    def stand_in(*args: Any, **kwargs: Any) -> Any:
        _run_init(package)
        return package.__dict__[attr](*args, **kwargs)

    return stand_in


def _reader() -> str | None:
    """The module reading a deferred package's name: the first caller outside the import system
    (``from package import name`` asks the name first from importlib's ``_handle_fromlist``)."""
    frame = sys._getframe(2)
    while frame is not None and frame.f_globals.get("__name__") == "importlib._bootstrap":
        frame = frame.f_back
    return frame.f_globals.get("__name__") if frame is not None else None


class _RequestLater:
    """A protocol class of module ``module``, ``attr``, as a module that makes requests of it without
    sending them reads it: ``cls[version](*args)`` is a request made of the real class when it is
    first read (an attribute, its text), the same request from then on."""

    __slots__ = ("_module", "_attr", "_version", "_args", "_made")

    def __init__(self, module: str, attr: str, version: Any = None, args: tuple = ()) -> None:
        self._module, self._attr, self._version, self._args, self._made = module, attr, version, args, None

    def __getitem__(self, version: Any) -> "_RequestLater":
        return _RequestLater(self._module, self._attr, version)

    def __call__(self, *args: Any, **kwargs: Any) -> "_RequestLater":
        return _RequestLater(self._module, self._attr, self._version, (args, kwargs))

    def _request(self) -> Any:
        if self._made is None:
            cls = getattr(importlib.import_module(self._module), self._attr)
            args, kwargs = self._args
            self._made = cls[self._version](*args, **kwargs)
        return self._made

    def __getattr__(self, name: str) -> Any:
        return getattr(self._request(), name)

    def __repr__(self) -> str:
        return repr(self._request())


def _run_init(package: types.ModuleType) -> None:
    """Run the real ``__init__.py`` of a registered package, once."""
    if package.__dict__.pop("__getattr__", None) is None:
        return  # running or ran already
    package.__spec__.loader.exec_module(package)  # type: ignore[union-attr]


# The kafka-python modules the wire's codecs import to encode and read each API (each codec imports
# its own where it first encodes: these are the same modules, by API name).
PROTOCOL_MODULES: dict[str, tuple[str, ...]] = {
    "ListOffsets": ("kafka.protocol.consumer.offsets",),
    "DescribeProducers": ("kafka.protocol.admin.transactions",),
    "ListTransactions": ("kafka.protocol.admin.transactions",),
    "DescribeTransactions": ("kafka.protocol.admin.transactions",),
    "FindCoordinator": ("kafka.protocol.metadata",),
    "DescribeConfigs": ("kafka.protocol.admin.configs",),
    "Fetch": ("kafka.protocol.consumer.fetch",),  # a batch is read by the wire (.fetch_records); kafka.record only for a compressed one
    "ListGroups": ("kafka.protocol.admin.groups",),
    "OffsetFetch": ("kafka.protocol.consumer.group",),
    "DescribeGroups": ("kafka.protocol.admin.groups",),
}


def import_protocol(apis: tuple[str, ...]) -> None:
    """Import the kafka-python modules of ``apis`` (:data:`PROTOCOL_MODULES`), and the wire's codecs and
    readers of their requests (each imported where first used otherwise: on the IO thread, maybe): a
    command that will send them does it while its bootstrap is in flight (``Session.connect_ahead``,
    ``Session.will_ask``)."""
    for api in apis:
        for module in PROTOCOL_MODULES[api]:
            importlib.import_module(module)
    from kafkatxn.kafka import protocol as p
    from kafkatxn.kafka.wire.bodies import READERS
    from kafkatxn.kafka.wire.codecs import DECODERS, ENCODERS

    for kind, name in p.REQUEST_NAMES.items():
        if name in apis:
            ENCODERS.get(kind), DECODERS.get(kind), READERS.get(kind)
