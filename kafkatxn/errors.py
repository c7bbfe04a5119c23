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
