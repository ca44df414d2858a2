"""A job's workflow as SVG geometry: what it waits for, the job, what waits for it.

Pure arithmetic, no I/O, no JavaScript, like `charts`: three columns of boxes (the
upstream jobs on the left, the job in the middle, its dependents and then the children
it spawned on the right, a child's box marked `Box.child`),
each coloured by its status, with an arrow from each upstream box to the job and
from the job to each dependent. A column shows at most `SHOWN` boxes and then one
"and N more" box (a batch of 10,000 is counted, not drawn).

>>> from sa_jobqueue.ops.workflows import Graph, GraphNode
>>> drawing = layout(GraphNode(2, "resize", "waiting"), Graph([GraphNode(1, "fetch", "done")], []))
>>> [(box.job_id, box.css) for box in drawing.boxes], len(drawing.arrows)
([(1, 'done'), (2, 'waiting')], 1)
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sa_jobqueue.ops.workflows import Graph, GraphNode

__all__ = ["SHOWN", "Arrow", "Box", "Drawing", "layout"]

#: The most boxes drawn in one column.
SHOWN = 12

_BOX_W, _BOX_H, _GAP, _COLUMN = 170, 34, 10, 240


@dataclass(frozen=True, slots=True)
class Box:
    """One job (or the "and N more" box, `job_id` None), in SVG user units."""

    x: float
    y: float
    width: float
    height: float
    css: str
    label: str
    job_id: int | None
    #: A job that this one spawned (``ctx.spawn``).
    child: bool = False


@dataclass(frozen=True, slots=True)
class Arrow:
    """A line from one box's right edge to another's left edge."""

    x1: float
    y1: float
    x2: float
    y2: float


@dataclass(slots=True)
class Drawing:
    """What the template draws: its size, the boxes and the arrows."""

    width: int
    height: int
    boxes: list[Box] = field(default_factory=list)
    arrows: list[Arrow] = field(default_factory=list)


def _column(
    nodes: list[GraphNode], x: float, children: frozenset[GraphNode] = frozenset()
) -> list[Box]:
    boxes = [
        Box(
            x,
            i * (_BOX_H + _GAP),
            _BOX_W,
            _BOX_H,
            n.status,
            f"{n.id} {n.kind}",
            n.id,
            n in children,
        )
        for i, n in enumerate(nodes[:SHOWN])
    ]
    if len(nodes) > SHOWN:
        more = len(nodes) - SHOWN
        y = SHOWN * (_BOX_H + _GAP)
        boxes.append(Box(x, y, _BOX_W, _BOX_H, "more", f"and {more:,} more", None))
    return boxes


def layout(job: GraphNode, graph: Graph) -> Drawing:
    """Lay out `job` between its upstream jobs and its dependents."""
    left = _column(graph.upstream, 0)
    right = _column([*graph.dependents, *graph.children], 2 * _COLUMN, frozenset(graph.children))
    rows = max(len(left), len(right), 1)
    height = rows * (_BOX_H + _GAP) - _GAP
    middle = Box(
        _COLUMN, (height - _BOX_H) / 2, _BOX_W, _BOX_H, job.status, f"{job.id} {job.kind}", job.id
    )
    arrows = [
        Arrow(b.x + b.width, b.y + b.height / 2, middle.x, middle.y + middle.height / 2)
        for b in left
    ]
    arrows += [
        Arrow(middle.x + middle.width, middle.y + middle.height / 2, b.x, b.y + b.height / 2)
        for b in right
    ]
    return Drawing(2 * _COLUMN + _BOX_W, int(height), [*left, middle, *right], arrows)
