"""The facade: the one object commands use to ask Kafka anything.

``Cluster`` is a :class:`~kafkatxn.kafka.session.Session` (the deadline, the clients, sending and
error translation) with one mixin per Kafka API family, each in its own module: ``metadata``,
``offsets``, ``producer_state``, ``transactions``, ``groups``, ``configs`` and ``markers``. The wire
(:mod:`kafkatxn.kafka.wire`, kafka-python) serves metadata, the KIP-664 APIs, ListOffsets,
ApiVersions, consumer groups, broker configs, the cluster's authorized operations, fencing and
Fetch (read_committed probes, the transaction log): every request of a command. confluent-kafka
(librdkafka) is left to the Spark side (kafka/log_reader.py's executors, the exactly-once writer).
Requests go to leaders and coordinators, batched, with what fresh metadata can cure retried;
answers are :class:`Partial`, whose ``missing`` names each part that did not arrive as a typed
:class:`Missing`. Every call shares the deadline of the command (``--timeout``); a dead broker
costs one deadline, not one per part.
"""

from __future__ import annotations

import importlib
import time
from typing import Iterable

from kafkatxn.config import ConnectionConfig, check_settings_as_librdkafka
from kafkatxn.kafka.configs import ConfigsApi
from kafkatxn.kafka.fetch_ahead import FetchAheadApi
from kafkatxn.kafka.groups import GroupsApi
from kafkatxn.kafka.markers import MarkersApi
from kafkatxn.kafka.metadata import MetadataApi
from kafkatxn.kafka.offsets import OffsetsApi, _offsets_requests
from kafkatxn.kafka.producer_state import DESCRIBE_PRODUCERS_BATCH, ProducerStateApi
from kafkatxn.kafka.session import LEADERSHIP_ERRORS, Session
from kafkatxn.kafka.transaction_log import TransactionLogApi
from kafkatxn.kafka.transactions import TransactionsApi
from kafkatxn.metadata_columns import ColumnMetadata
from kafkatxn.model import Missing, Part, Partial, PartitionInfo, TopicPartition

__all__ = ["Cluster", "check_client_settings", "DESCRIBE_PRODUCERS_BATCH", "LEADERSHIP_ERRORS"]


class Cluster(
    MetadataApi, OffsetsApi, ProducerStateApi, TransactionsApi, GroupsApi, ConfigsApi, MarkersApi, TransactionLogApi, FetchAheadApi,
    Session,
):
    """Facade over both Kafka clients for one command run. Use as a context manager."""

    def select_partitions(
        self,
        topics: Iterable[str] | None = None,
        partition: int | None = None,
        include_internal: bool = False,
        topic_pattern: str | None = None,
    ) -> list[PartitionInfo]:
        """:func:`kafkatxn.selection.select_partitions` over this cluster's metadata (input checked first:
        a usage error sends nothing)."""
        from kafkatxn import selection

        selection.check_selection(topics, partition, topic_pattern)
        return selection.select_partitions(self.metadata(), topics, partition, include_internal, topic_pattern)

    def select_topic_partitions(self, topics: Iterable[str] | None = None, partition: int | None = None,
                                include_internal: bool = False) -> list[TopicPartition]:
        """The TopicPartitions of :meth:`select_partitions`, in its order. Every partition (no topic nor
        partition named: ``hanging``'s scan, internal topics' too; ``producers``', without them): the
        metadata's own TopicPartitions, as they are made once per answer; no PartitionInfo made for each of
        30,000 and more to be taken apart again."""
        from kafkatxn.model import topic_partitions

        topics = list(topics or [])
        if not topics and partition is None:  # nothing named: no input to check
            md = self.metadata()
            if include_internal:
                return list(md.tps)
            if type(md) is ColumnMetadata:  # its topics' runs in the metadata's order, the internal ones left out
                return list(md.data_partitions()[0])
        return topic_partitions(self.select_partitions(topics, partition, include_internal))

    def select_in_partition_order(self, topics: Iterable[str] | None = None) -> tuple[list[TopicPartition], list[int] | None]:
        """:func:`kafkatxn.selection.select_in_partition_order` over this cluster's metadata: the partitions
        ``lso`` measures, in partition order, and their leaders where the metadata had them in that order."""
        from kafkatxn import selection

        selection.check_selection(topics)
        return selection.select_in_partition_order(self.metadata(), topics)

    def data_offsets_ahead(self) -> None:
        """The requests ``stable_and_high_offsets_ahead`` makes of the partitions :meth:`select_in_partition_order`
        chooses without topics (``lso``'s), sent now from the metadata's columns, each leader's topics' runs
        (``ColumnMetadata.data_runs_by_leader``), before any of their 30,000 TopicPartitions is made: those
        are made while the brokers answer. Nothing is sent outside a run, when the run holds offsets, where
        the metadata was not read as columns or a partition has no leader to ask: the others send them."""
        if self._answers is None or self.answered_any("ListOffsets"):
            return
        md = self.metadata()
        grouped = md.data_runs_by_leader(self.silent) if type(md) is ColumnMetadata else None
        if grouped:
            self.send_now(_offsets_requests(grouped, (True, False), False))  # as stable_and_high_offsets_ahead's

    def will_read_log_while_waiting(self) -> None:
        """The modules that read the coordinators' log (:meth:`transaction_log_histories`, which settles a
        transaction past its deadline: a hanging one) imported now if a round begun by ``send_now`` is
        still waiting for answers, as :meth:`will_ask_while_waiting` imports the protocol's; otherwise
        where the log is first read, after its Fetch has answered, at the command's end."""
        if self.answers_pending():
            importlib.import_module("kafkatxn.kafka.log_fetch")  # and with it the log's decoder and records

    def route_while_waiting(self) -> None:
        """The leader of every partition (``ClusterMetadata.leaders``: 30,000 and more), by which the
        requests after a round begun by ``send_now`` are routed (a lagging partition's DescribeProducers
        and Fetch), made now if that round is still waiting for answers; otherwise where first routed. A
        metadata read as columns makes no dict here: its few lagging partitions are looked up in their
        topics' runs (``leader_map.LeadersWhenRead``); the dict is made here for one read otherwise."""
        if self.answers_pending():
            self.metadata().leaders  # noqa: B018 - made and kept by the metadata

    def writer_batches(self, ledger_topic: str, application: str, query: str | None) -> Partial[dict[int, int]]:
        """Per task of kafkatxn's exactly-once writer ``application``/``query``, the batch its ledger
        says it committed last (``ledger.writer_batches``, read_committed, within the deadline); what
        could not be read is a missing part naming the ledger topic."""
        from kafkatxn.kafka import ledger

        prefix = f"{application}/{query or ''}/"
        try:
            found = ledger.writer_batches(self.config.librdkafka(), ledger_topic, prefix, max(self.deadline - time.monotonic(), 0.1))
        except (TimeoutError, RuntimeError, ValueError, KeyError) as exc:
            return Partial({}, [Missing(Part(f"ledger topic {ledger_topic}"), str(exc) or type(exc).__name__)])
        return Partial({int(key[len(prefix):]): batch for key, batch in found.items() if key[len(prefix):].isdigit()})


def check_client_settings(config: ConnectionConfig) -> None:
    """Raise the usage error a command would meet when it first builds its clients, without waiting
    for anything: librdkafka checks its settings as a client is made, kafka-python's are mapped here."""
    config.kafka_python()
    if not config.librdkafka_logs_in:
        # GSSAPI: the wire serves it; a part that needs librdkafka refuses as it builds its client.
        check_settings_as_librdkafka(config.settings)
        return
    with Cluster(config) as cluster:
        cluster.build_admin()  # building it is the check; nothing is sent
