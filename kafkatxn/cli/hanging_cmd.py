"""``kafkatxn hanging``."""

from collections.abc import Sequence
from typing import TYPE_CHECKING

import typer

from kafkatxn import collection
from kafkatxn.cli.options import BrokerId, MaxTransactionTimeout, Partition, Topics
from kafkatxn.cli.common import CommandContext, command, fail_if_missing
from kafkatxn.exitcodes import EXIT_CRITICAL, EXIT_OK, EXIT_WARNING, exit_code
from kafkatxn.model import TopicPartition

if TYPE_CHECKING:  # imported while the producer states' round trip is in flight (_find_hanging)
    from kafkatxn import hanging
    from kafkatxn.kafka import Cluster


def register(app: typer.Typer) -> None:
    @command(app, "hanging")
    def hanging_command(
        ctx: CommandContext,
        broker_id: BrokerId = None,
        topic: Topics = None,
        partition: Partition = None,
        max_transaction_timeout: MaxTransactionTimeout = None,
    ) -> int:
        """Find hanging transactions: open on a partition, but not tracked by their coordinator.

        Such a transaction is never completed: the partition's last stable offset stays pinned and
        read_committed consumers stall. With no selection the whole cluster is scanned, internal
        topics included. Transactions whose coordinator still tracks them although they are past
        the maximum timeout are listed as long-running (also while their coordinator completes them,
        and two-phase-commit transactions). A candidate is hanging only when every coordinator that
        could own its transactional id answered; otherwise it is listed as undetermined, with the
        part that did not answer. Exit 2 when any transaction hangs, 3 when any is undetermined or
        part of the cluster did not answer, 1 when only long-running or untracked ones are found.
        An open transaction no coordinator tracks becomes hanging once its producer's own
        transaction timeout (which its coordinator reports; otherwise the maximum) has passed since
        its last write; until then it is listed as untracked, with the time it hangs from.
        Release a hanging transaction with `kafkatxn abort`. Before a transaction of a known
        transactional id is called hanging, its coordinator's log (__transaction_state, READ needed)
        is read: one its coordinator committed is listed as a lost COMMIT marker (exit 2; restore it
        with `kafkatxn restore-commit`, never abort it), one the log cannot tell about as undetermined.
        """
        from kafkatxn import selection

        selection.check_selection(topic, partition)  # a usage error sends nothing
        # the bootstrap in flight while the facade imports; the whole cluster's scan asks every broker
        ctx.connect_ahead(every_broker=not topic and broker_id is None)  # a partition needs a topic (check_selection)
        with collection.one_shot():
            return _shown(ctx, _find_hanging(ctx.cluster, broker_id, topic, partition, max_transaction_timeout))


def _shown(ctx: CommandContext, result: "hanging.HangingResult") -> int:
    """The result shown: its rows, a note per undetermined, lost-commit and untracked one; the exit code."""
    from kafkatxn import untracked
    from kafkatxn.lost_commit import restore_note

    ctx.render(result.report(), missing=result.missing)
    for row in result.undetermined:
        ctx.note(
            f"undetermined: producer {row.producer_id} on {row.topic}-{row.partition} from offset {row.start_offset}: "
            f"{row.reason}"
        )
    for row in result.lost_commit:
        ctx.note(restore_note(TopicPartition(row.topic, row.partition), row.producer_id, row.start_offset))
    for row in result.untracked:
        ctx.note(untracked.note(TopicPartition(row.topic, row.partition), row.producer_id, row.start_offset,
                                row.transactional_id, row.hanging_at_ms))
    fail_if_missing(ctx, result.missing, "scan for hanging transactions")
    findings = (EXIT_CRITICAL if result.hanging or result.lost_commit
                else EXIT_WARNING if result.long_running or result.untracked else EXIT_OK)
    return exit_code(findings, result.missing, undetermined=bool(result.undetermined))


def _find_hanging(cluster: "Cluster", broker_id: int | None, topics: Sequence[str] | None, partition: int | None,
                  max_transaction_timeout_ms: int | None) -> "hanging.HangingResult":
    """``hanging.find_hanging``, its producer states sent first: in one run, with the maximum timeout
    given (no configs round before them) and no broker named, the chosen partitions' DescribeProducers
    go down as the scan will ask them (``Cluster.describe_producers_ahead``, the topic-visibility probe
    with them), and the library that reads their answers (the fact layer, the verdicts) and, while
    they have not answered, the protocol modules of the requests after them are imported meanwhile."""
    with cluster.one_run():
        partitions = None
        if broker_id is None and max_transaction_timeout_ms is not None:
            cluster.will_ask("DescribeProducers")  # kafka-python's request class, imported here rather than on the IO thread
            partitions = cluster.select_topic_partitions(topics, partition, include_internal=True)
            if not topics:
                cluster.topic_list_filtered_ahead()
            cluster.describe_producers_ahead(partitions)
        from kafkatxn import hanging

        cluster.will_ask_while_waiting("ListTransactions", "FindCoordinator", "DescribeTransactions", "Fetch")
        return hanging.find_hanging(cluster, broker_id=broker_id, topics=topics, partition=partition,
                                    max_transaction_timeout_ms=max_transaction_timeout_ms, partitions=partitions)
