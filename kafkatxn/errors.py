"""Errors that end a command, each carrying the exit code the README documents."""

from __future__ import annotations

# Exit codes, the same for every command (README "Exit codes").
EXIT_OK = 0
EXIT_WARNING = 1
EXIT_CRITICAL = 2
EXIT_UNKNOWN = 3
EXIT_USAGE = 64

# Widths of Kafka's wire fields: partition and broker ids and epochs are int32, producer epochs
# int16, offsets and producer ids int64. Options bounded by them refuse typos before any request.
INT16_MAX = 2**15 - 1
INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1


class KafkatxnError(Exception):
    """An error reported as one line on stderr; ``exit_code`` says how the command ends."""

    exit_code = EXIT_UNKNOWN


class UsageError(KafkatxnError):
    """Bad input from the user: arguments, properties files, profiles, durations."""

    exit_code = EXIT_USAGE


class InputError(UsageError):
    """Bad input, named by what it is rather than by a command-line flag: the library says
    ``{partition} needs exactly one {topic}``; the CLI words it with its own options
    (``--partition needs exactly one --topic``), another caller with its own names."""

    def __init__(self, template: str, **values: object):
        self.template = template
        self.values = values
        super().__init__(self.worded({}))

    def worded(self, names: dict[str, str]) -> str:
        """The message with each ``{input}`` named as ``names`` says (plainly where it does not)."""
        return self.template.format_map(_Named(names, self.values))


class _Named(dict):
    def __init__(self, names: dict[str, str], values: dict[str, object]):
        super().__init__(values)
        self.names = names

    def __missing__(self, key: str) -> str:
        return self.names.get(key, key.replace("_", " "))


class ClusterError(KafkatxnError):
    """The cluster could not answer: unreachable, authentication failed, timed out."""

    exit_code = EXIT_UNKNOWN


class UnreachableError(ClusterError):
    pass


class AuthenticationError(ClusterError):
    pass


class DeadlineExceeded(ClusterError):
    pass


class NotFoundError(KafkatxnError):
    """A topic, partition, producer or transactional id the cluster does not have."""

    exit_code = EXIT_UNKNOWN


class UnsupportedBrokerError(KafkatxnError):
    """The broker is too old for an API this command needs."""

    exit_code = EXIT_UNKNOWN
