"""A web dashboard for a jobs table: see and repair the queue in a browser.

``from sa_jobqueue.dashboard import make_app`` gives an ASGI (Starlette)
application to mount inside a web app, behind its own authentication;
``sa-jobqueue dashboard`` serves the same app on its own. It needs the
``dashboard`` extra: ``pip install 'sa-jobqueue[dashboard]'``. See docs/dashboard.md.
"""

from __future__ import annotations

from sa_jobqueue.dashboard.app import make_app

__all__ = ["make_app"]
