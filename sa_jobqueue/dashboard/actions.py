"""The dashboard's POST actions: one job, a queue, a schedule, and bulk actions on many jobs.

Every action needs ``allow_actions`` and a CSRF token matching the cookie (`_form`). Bulk
actions take two steps: the first POST shows what would change (`ops.bulk.count`) and
asks; the confirmed one runs `ops.bulk.apply` in batches. See docs/dashboard.md#bulk-actions.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qs

from sqlalchemy import Engine
from sqlalchemy.orm import Session
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from sa_jobqueue.core.validation import BIGINT_RANGE
from sa_jobqueue.dashboard.filters import FilterError, JobFilter
from sa_jobqueue.dashboard.security import CSRF_COOKIE, CSRF_FIELD, same_origin, tokens_match
from sa_jobqueue.errors import ConfigurationError, ValidationError
from sa_jobqueue.jobqueue import JobQueue
from sa_jobqueue.ops import admin, bulk, pausing
from sa_jobqueue.schema.model import JobMixin

__all__ = ["MAX_SELECTED", "Actions", "is_job_id", "job_id_of"]

log = logging.getLogger("sa_jobqueue.dashboard")

#: The most job ids one bulk form may carry (a page holds at most 1000 rows).
MAX_SELECTED = 1000

_JOB_ACTIONS: dict[str, Callable[..., admin.Changed]] = {
    "retry": admin.retry,
    # docs/workflows.md: the jobs its failure cancelled wait for it again.
    "retry-with-dependents": functools.partial(admin.retry, with_dependents=True),
    "cancel": admin.cancel,
    "delete": admin.delete_finished,
}


def is_job_id(job_id: int) -> bool:
    """Whether `job_id` fits the ``bigint`` id column (a larger one names no job)."""
    low, high = BIGINT_RANGE
    return low <= job_id <= high


def job_id_of(text: str) -> int | None:
    """`text` as a job id: ASCII digits that fit ``bigint``, else None.

    ``str.isdigit`` and ``int`` also take other scripts' digits (``"١٢"`` is 12).

    >>> job_id_of("12"), job_id_of("١٢"), job_id_of(str(2**63))
    (12, None, None)
    """
    if not (text.isascii() and text.isdigit()):
        return None
    job_id = int(text)
    return job_id if is_job_id(job_id) else None


class Actions:
    """The POST endpoints, mixed into the dashboard's shared state (`app._Dashboard`)."""

    model: type[JobMixin]
    engine: Engine
    jobqueue: JobQueue[Any]
    allow_actions: bool

    def page(self, request: Request, name: str, status_code: int = 200, **context: Any) -> Response:
        """Render a template (`app._Dashboard.page`)."""
        raise NotImplementedError

    def error(self, request: Request, status_code: int, message: str) -> Response:
        """An error page (`app._Dashboard.error`)."""
        raise NotImplementedError

    def read(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """A read-only transaction (`app._Dashboard.read`)."""
        raise NotImplementedError

    def change(self, fn: Callable[..., admin.Changed], *args: Any, **kwargs: Any) -> admin.Changed:
        """Run the admin function `fn(session, model, ...)` and commit."""
        with Session(self.engine) as session, session.begin():
            return fn(session, self.model, *args, **kwargs)

    async def _form(self, request: Request) -> dict[str, str] | Response:
        """The POSTed form, or the refusal when actions are off or the CSRF check fails."""
        posted = await self._posted(request)
        if isinstance(posted, Response):
            return posted
        return {key: values[-1] for key, values in posted.items()}

    async def _posted(self, request: Request) -> dict[str, list[str]] | Response:
        """`_form` with every value of each field (the ids a bulk form carries)."""
        if not self.allow_actions:
            return self.error(
                request, 403, "This dashboard is read-only (start it with --allow-actions)."
            )
        body = (await request.body()).decode("utf-8", errors="replace")
        form = parse_qs(body)
        token = form[CSRF_FIELD][-1] if form.get(CSRF_FIELD) else None
        cookie = request.cookies.get(CSRF_COOKIE)
        if not same_origin(request.headers) or not tokens_match(token, cookie):
            return self.error(
                request, 403, "Refused: the form's CSRF token is missing or does not match."
            )
        return form

    async def job_action(self, request: Request) -> Response:
        """Retry, cancel or delete one job, then show it again."""
        action = request.path_params["action"]
        if action == "rerun":
            return await self.rerun_action(request)
        fn = _JOB_ACTIONS.get(action)
        if fn is None:
            return self.error(request, 404, f"There is no action {action!r}.")
        form = await self._form(request)
        if isinstance(form, Response):
            return form
        job_id = request.path_params["job_id"]
        if not is_job_id(job_id):
            return self.error(request, 404, f"There is no job {job_id}.")
        changed = await run_in_threadpool(self.change, fn, [job_id])
        log.info("dashboard: %s job %s -> %s", action, job_id, changed.to_dict())
        done = bool(changed.ids)
        if action == "delete" and done:
            target = request.url_for("jobs")
            return RedirectResponse(f"{target}?notice=deleted", status_code=303)
        notice = action if done else f"not_{action}"
        if action == "delete" and changed.awaited:
            notice = "awaited_delete"
        elif action == "retry" and changed.waiting:
            notice = "retry_waiting"
        target = request.url_for("job", job_id=job_id)
        return RedirectResponse(f"{target}?notice={notice}", status_code=303)

    async def rerun_action(self, request: Request) -> Response:
        """A new job re-running this one from the step in field ``step`` (`JobQueue.rerun`)."""
        form = await self._form(request)
        if isinstance(form, Response):
            return form
        job_id = request.path_params["job_id"]
        if not is_job_id(job_id):
            return self.error(request, 404, f"There is no job {job_id}.")
        step = form.get("step", "")
        try:
            new_id = await run_in_threadpool(self._rerun, job_id, step)
        except ValidationError as error:
            return self.error(request, 400, str(error))
        log.info("dashboard: rerun job %s from step %r -> job %s", job_id, step, new_id)
        target = request.url_for("job", job_id=new_id)
        return RedirectResponse(f"{target}?notice=rerun", status_code=303)

    def _rerun(self, job_id: int, step: str) -> int:
        with Session(self.engine) as session, session.begin():
            return int(self.jobqueue.rerun(session, job_id, from_step=step).id)

    async def queue_action(self, request: Request) -> Response:
        """Pause or resume a queue (`ops.pausing.pause` / `resume`, as ``sa-jobqueue pause``)."""
        action = request.path_params["action"]
        if action not in ("pause", "resume"):
            return self.error(request, 404, f"There is no action {action!r}.")
        form = await self._form(request)
        if isinstance(form, Response):
            return form
        queue = form.get("queue", "")
        fn = pausing.pause if action == "pause" else pausing.resume
        try:
            changed = await run_in_threadpool(self._switch, fn, queue)
        except ValidationError as error:
            return self.error(request, 400, str(error))
        log.info("dashboard: %s queue %r -> %s", action, queue, changed)
        notice = f"{action}d" if changed else f"already_{action}d"
        target = request.url_for("overview")
        return RedirectResponse(f"{target}?notice={notice}", status_code=303)

    async def schedule_action(self, request: Request) -> Response:
        """Pause, resume or run now one schedule (as ``sa-jobqueue schedules ...``)."""
        action = request.path_params["action"]
        if action not in ("pause", "resume", "run"):
            return self.error(request, 404, f"There is no action {action!r}.")
        form = await self._form(request)
        if isinstance(form, Response):
            return form
        name = form.get("schedule", "")
        try:
            changed = await run_in_threadpool(self._schedule, action, name)
        except (ValidationError, ConfigurationError) as error:
            return self.error(request, 400, str(error))
        log.info("dashboard: %s schedule %r -> %s", action, name, changed)
        if action == "run":
            notice = "schedule_ran"
        else:
            notice = f"schedule_{action}d" if changed else f"schedule_already_{action}d"
        target = request.url_for("workers")
        return RedirectResponse(f"{target}?notice={notice}#schedules", status_code=303)

    def _schedule(self, action: str, name: str) -> bool:
        with Session(self.engine) as session, session.begin():
            if action == "pause":
                return self.jobqueue.pause_schedule(session, name)
            if action == "resume":
                return self.jobqueue.resume_schedule(session, name)
            self.jobqueue.run_schedule_now(session, name)
            return True

    def _switch(self, fn: Callable[..., list[str]], queue: str) -> list[str]:
        with Session(self.engine) as session, session.begin():
            return fn(session, self.model, queue)

    # -- bulk ------------------------------------------------------------------

    async def bulk_action(self, request: Request) -> Response:
        """Retry, cancel or delete the selected jobs, or all matching the filter: ask, then do.

        Fields: ``action``; ``scope`` (``selected``: the ``id`` fields, or ``all``:
        the filter fields of the jobs page); ``confirm`` once the operator agreed to
        the count the first step showed.
        """
        posted = await self._posted(request)
        if isinstance(posted, Response):
            return posted
        form = {key: values[-1] for key, values in posted.items()}
        action = form.get("action", "")
        if action not in bulk.ACTIONS:
            return self.error(request, 400, f"There is no bulk action {action!r}.")
        try:
            job_filter = JobFilter.parse(form)
        except FilterError as problem:
            return self.error(request, 400, str(problem))
        selection: dict[str, Any]
        if form.get("scope") == "all":
            selection = {"match": job_filter.match()}
        else:
            raw = posted.get("id", [])
            if not raw:
                return self.error(
                    request, 400, "Select at least one job, or choose all matching the filter."
                )
            if len(raw) > MAX_SELECTED:
                return self.error(request, 400, f"Select at most {MAX_SELECTED} jobs at a time.")
            picked = [job_id_of(value) for value in raw]
            if None in picked:
                return self.error(
                    request, 400, "The selection holds something that is not a job id."
                )
            selection = {"ids": picked}
        try:
            counted = await run_in_threadpool(self.read, bulk.count, action, **selection)
        except ConfigurationError as problem:
            return self.error(request, 400, str(problem))
        if form.get("confirm") != "yes":
            return self.page(
                request,
                "bulk.html",
                action=action,
                counted=counted,
                f=job_filter,
                scope=form.get("scope", "selected"),
                ids=selection.get("ids", []),
                statuses=bulk.ACTIONS[action],
            )
        result = await run_in_threadpool(bulk.apply, self.engine, self.model, action, **selection)
        log.info("dashboard: bulk %s %s -> %s", action, form.get("scope"), result.to_dict())
        target = request.url_for("jobs")
        query = job_filter.query_string(after=None)
        separator = "&" if query else ""
        return RedirectResponse(
            f"{target}?{query}{separator}notice=bulk_{action}&n={result.changed}", status_code=303
        )

    async def retry_failed(self, request: Request) -> Response:
        """Retry every failed job of a kind (and queue, when given)."""
        form = await self._form(request)
        if isinstance(form, Response):
            return form
        kind = form.get("kind") or None
        queue = form.get("queue") or None
        if kind is None:
            return self.error(request, 400, "Retrying all failed jobs needs a kind.")
        changed = await run_in_threadpool(self.change, admin.retry_failed, kind=kind, queue=queue)
        log.info("dashboard: retry failed kind=%s queue=%s -> %d", kind, queue, len(changed.ids))
        query = JobFilter(status="pending", kind=kind, queue=queue).query_string()
        target = request.url_for("jobs")
        return RedirectResponse(
            f"{target}?{query}&notice=retried_failed&n={len(changed.ids)}", status_code=303
        )
