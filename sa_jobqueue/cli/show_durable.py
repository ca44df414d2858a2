"""``jobs show``'s durable part: progress, recorded steps, sleeps and signals (docs/durable.md)."""

from __future__ import annotations

import json
from typing import Any

import click

from sa_jobqueue.cli.render import when
from sa_jobqueue.ops.durable_state import DurableState
from sa_jobqueue.schema.steps import STEP_KINDS

__all__ = ["show_durable"]


#: Kinds whose rows are shown with their result (``spawn``: the child's id; ``child``: how
#: it ended): every kind but those whose line says their time instead.
_WITH_RESULT = tuple(kind for kind in STEP_KINDS if kind not in ("sleep", "wait", "timeout"))


def compensation_line(state: dict[str, Any] | None) -> str:
    """How a job's compensation stands, in words (``-``: it has none)."""
    if state is None:
        return "-"
    line = {"owed": "running (owed)", "finished": "finished", "failed": "failed"}.get(
        str(state.get("state")), str(state.get("state"))
    )
    line += f", ends {state.get('status')}"
    if state.get("error"):
        line += f": {str(state['error']).splitlines()[0]}"
    return line


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


def show_durable(progress: Any, state: DurableState) -> None:
    """Print the job's progress, what it is parked for, its steps and its signals."""
    click.echo(f"progress: {'-' if progress is None else _json(progress)}")
    click.echo(f"parked for: {state.parked_for or '-'}")
    click.echo(f"compensation: {compensation_line(state.compensation)}")
    click.echo("steps:" + ("" if state.steps else " -"))
    for step in state.steps:
        line = f"  {step.name} {step.kind} (attempt {step.attempt}, {when(step.recorded_at)})"
        if step.kind == "sleep":
            line += f" until {when(step.until)}"
        elif step.kind == "wait":
            line += " waiting, " + (f"timeout {when(step.until)}" if step.until else "no timeout")
        elif step.kind in _WITH_RESULT and step.result is not None:
            line += f": {_json(step.result)}"
        click.echo(line)
    click.echo("signals:" + ("" if state.signals else " -"))
    for signal in state.signals:
        taken = f"taken {when(signal.consumed_at)}" if signal.consumed_at else "not taken yet"
        click.echo(f"  {signal.name} sent {when(signal.sent_at)}, {taken}: {_json(signal.payload)}")
