"""``jobs show``'s durable part: progress, recorded steps, sleeps and signals (docs/durable.md)."""

from __future__ import annotations

import json
from typing import Any

import click

from sa_jobqueue.cli.render import when
from sa_jobqueue.ops.durable_state import DurableState

__all__ = ["show_durable"]


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


#: The kinds of rows whose result is shown (``spawn``: the child's id; ``child``: how it ended).
_WITH_RESULTS = ("step", "signal", "try", "patch", "spawn", "child")


def show_durable(progress: Any, state: DurableState) -> None:
    """Print the job's progress, what it is parked for, its steps and its signals."""
    click.echo(f"progress: {'-' if progress is None else _json(progress)}")
    click.echo(f"parked for: {state.parked_for or '-'}")
    click.echo("steps:" + ("" if state.steps else " -"))
    for step in state.steps:
        line = f"  {step.name} {step.kind} (attempt {step.attempt}, {when(step.recorded_at)})"
        if step.kind == "sleep":
            line += f" until {when(step.until)}"
        elif step.kind == "wait":
            line += " waiting, " + (f"timeout {when(step.until)}" if step.until else "no timeout")
        elif step.kind in _WITH_RESULTS and step.result is not None:
            line += f": {_json(step.result)}"
        click.echo(line)
    click.echo("signals:" + ("" if state.signals else " -"))
    for signal in state.signals:
        taken = f"taken {when(signal.consumed_at)}" if signal.consumed_at else "not taken yet"
        click.echo(f"  {signal.name} sent {when(signal.sent_at)}, {taken}: {_json(signal.payload)}")
