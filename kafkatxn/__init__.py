"""kafkatxn: operations tooling for transactional Apache Kafka clusters."""

from importlib.metadata import PackageNotFoundError, version as _version

try:
    # The installed distribution's metadata (pyproject.toml's version), so a wheel, a pipx install
    # and an editable checkout all report what was installed.
    __version__ = _version("kafkatxn")
except PackageNotFoundError:  # imported from a source tree that was never installed
    __version__ = "0+unknown"
