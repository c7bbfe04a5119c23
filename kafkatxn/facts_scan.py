"""The fact layer's scan (:mod:`kafkatxn.facts`): every open transaction on the partitions a command
scans, each through the one pins sequence (:func:`kafkatxn.facts.pins`).

``hanging`` lists it, ``abort --all-hanging`` plans on it (what it acts on is what ``hanging``
lists), and ``check`` and the exporter count it: the same :class:`Scan`, made by :func:`scan_of`
(:func:`kafkatxn.facts_cluster.gather_snapshot` hands it the producer states its offsets round trip
already asked for). Nothing here decides: the verdicts are
:mod:`kafkatxn.verdicts`', the rows each command's.
"""

from __future__ import annotations

from dataclasses import field
from typing import TYPE_CHECKING, Sequence

from kafkatxn import facts, gather
from kafkatxn.gather import in_one_run
from kafkatxn.model import FRESH, Missing, Record, TopicPartition, record
from kafkatxn.verdicts import MAX_TIMEOUT_CONFIG, Classification

if TYPE_CHECKING:  # handed the facade; not imported
    from kafkatxn.kafka import Cluster


@record
class Scan(Record):
    """What :func:`take_scan` found on the partitions it scanned."""

    partitions: list[TopicPartition]
    producers: facts.ProducerStates
    pins: facts.Pins  # every open transaction there, classified, asked again, settled by the log and dated
    max_transaction_timeout_ms: int
    max_transaction_timeout_source: str  # the broker config, or the option that gave it
    missing: list[Missing] = field(default_factory=list)

    def __init__(self, partitions: list[TopicPartition], producers: facts.ProducerStates, pins: facts.Pins,
                 max_transaction_timeout_ms: int, max_transaction_timeout_source: str,
                 missing: list[Missing] = FRESH) -> None:
        self.__dict__.update(partitions=partitions, producers=producers, pins=pins,
                             max_transaction_timeout_ms=max_transaction_timeout_ms,
                             max_transaction_timeout_source=max_transaction_timeout_source,
                             missing=[] if missing is FRESH else missing)

    @property
    def now_ms(self) -> int:
        """What the verdicts date by: when the producer states were taken, unless the scan was given a moment."""
        return self.pins.now_ms

    def due(self) -> list[Classification]:
        """Past their deadline: ``hanging``'s candidates (:meth:`kafkatxn.facts.Pins.due`)."""
        return self.pins.due()

    def untracked(self) -> list[Classification]:
        """Untracked and not past their deadline yet (:meth:`kafkatxn.facts.Pins.untracked`)."""
        return self.pins.untracked()


def select_partitions(
    cluster: Cluster,
    broker_id: int | None = None,
    topics: Sequence[str] | None = None,
    partition: int | None = None,
) -> list[TopicPartition]:
    """The partitions to scan: named topics, or the whole cluster with internal topics; only those
    with a replica on ``broker_id`` when given (:func:`facts.selected_partitions`)."""
    return facts.selected_partitions(cluster, topics, partition, broker_id, include_internal=True)


@in_one_run
def take_scan(
    cluster: Cluster,
    broker_id: int | None = None,
    topics: Sequence[str] | None = None,
    partition: int | None = None,
    max_transaction_timeout_ms: int | None = None,
    partitions: list[TopicPartition] | None = None,
) -> Scan:
    """The partitions chosen (every one, internal topics too, without ``topics``; ``partitions``: the
    :func:`select_partitions` of these options, made by the caller in this run), the brokers'
    maximum timeout when not given (a cluster that does not say ends the command: no verdict can be
    given without it), their producer states (all asked of ``broker_id`` when given) and every open
    transaction in them (:func:`scan_of`)."""
    # The selection first: a bad one (--partition without one --topic) is a usage error before any request.
    tps = select_partitions(cluster, broker_id, topics, partition) if partitions is None else partitions
    if not topics:  # the topic-visibility probe needs nothing but the metadata: it goes with the next round
        cluster.topic_list_filtered_ahead()
    timeout_ms, source, config_missing = scan_timeout(cluster, max_transaction_timeout_ms)
    described = facts.producer_states(cluster, tps, broker_id=broker_id, with_transactional_ids=False)
    missing = (gather.unseen_topics(cluster) if not topics else []) + config_missing + described.missing
    return scan_of(cluster, tps, described, timeout_ms, source, missing)


def scan_timeout(cluster: Cluster, given_ms: int | None) -> tuple[int, str, list[Missing]]:
    """The maximum timeout a scan decides with, where it comes from, and the brokers that did not
    say: ``given_ms`` (the option), else the brokers' largest (raises when none says)."""
    if given_ms is not None:
        return given_ms, "--max-transaction-timeout", []
    timeout_ms, config_missing = gather.cluster_max_transaction_timeout(cluster)
    return timeout_ms, f"broker config {MAX_TIMEOUT_CONFIG}", config_missing


def scan_of(
    cluster: Cluster, partitions: list[TopicPartition], produced: facts.ProducerStates, max_transaction_timeout_ms: int,
    max_transaction_timeout_source: str, missing: list[Missing], now_ms: int | None = None,
) -> Scan:
    """The scan of ``partitions`` from their described producer states (``produced``): every open
    transaction in them through the one pins sequence (:func:`kafkatxn.facts.scan`: classified, the
    untracked asked again, settled by the log (did its coordinator commit it: a lost COMMIT marker?),
    dated by first records), decided as of ``now_ms`` (when the states were taken, unless given).
    ``hanging`` and ``abort`` take it through :func:`take_scan`; ``check`` and the exporter hand it
    the states their offsets round trip asked for (:func:`kafkatxn.facts_cluster.gather_snapshot`).
    What did not answer is appended to ``missing``, which the scan keeps."""
    now_ms = produced.taken_at_ms if now_ms is None else now_ms
    found = facts.scan(cluster, produced.states, now_ms, max_transaction_timeout_ms, missing)
    return Scan(partitions, produced, found, max_transaction_timeout_ms, max_transaction_timeout_source, missing)
