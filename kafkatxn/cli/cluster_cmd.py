"""``kafkatxn cluster``."""

from __future__ import annotations

import typer

from kafkatxn.cli.common import CommandContext, command, fail_if_missing


def register(app: typer.Typer) -> None:
    @command(app, "cluster")
    def cluster_command(ctx: CommandContext) -> int | None:
        """Cluster id, controller, brokers, Kafka version, transaction APIs and settings."""
        ctx.connect_ahead(every_broker=True)  # the bootstrap in flight while the facade and clusterinfo import
        from kafkatxn import clusterinfo

        info = clusterinfo.describe(ctx.cluster)
        ctx.render(info.report, missing=info.missing)
        return fail_if_missing(ctx, info.missing, "cluster description")
