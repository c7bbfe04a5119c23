"""``kafkatxn producers``: producer state on partitions (DescribeProducers)."""

from typing import Annotated

import typer

from kafkatxn.cli.options import BrokerId, Partition, Topics
from kafkatxn.cli.common import CommandContext, command, fail_if_missing


def register(app: typer.Typer) -> None:
    @command(app, "producers")
    def producers_command(
        ctx: CommandContext,
        topic: Topics = None,
        partition: Partition = None,
        broker_id: BrokerId = None,
        include_internal: Annotated[
            bool, typer.Option("--include-internal", help="Include internal topics (__consumer_offsets, __transaction_state).")
        ] = False,
        summary: Annotated[
            bool,
            typer.Option(
                "--summary",
                help="Per broker and per topic: active producer ids, producer states held, open transactions.",
            ),
        ] = False,
    ) -> int | None:
        """Active producers per partition: ids, epochs, sequences, last write and its age, open transaction start.

        Like kafka-transactions.sh describe-producers, for many partitions at once, batched per
        leader, with the transactional id where the coordinators still know it. Exit 3 for an
        unknown topic, partition or broker, or when some partitions did not answer.
        """
        from kafkatxn import selection

        selection.check_selection(topic, partition)  # a usage error sends nothing
        # the bootstrap in flight while the facade and the library import; every leader without a filter
        ctx.connect_ahead(every_broker=not topic and broker_id is None)  # a partition needs a topic (check_selection)
        from kafkatxn import producers

        chosen = producers.select_partitions(ctx.cluster, topic or [], partition, broker_id, include_internal)
        result = producers.describe_producers(ctx.cluster, chosen, broker_id=broker_id, summary=summary)
        row_type = producers.ProducerSummaryRow if summary else producers.ProducerRow
        ctx.render(result.value, row_type, empty_message="no active producers on the selected partitions", missing=result.missing)
        return fail_if_missing(ctx, result.missing, "producer state")
