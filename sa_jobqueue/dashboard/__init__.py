"""A web dashboard for a jobs table: see and repair the queue in a browser.

`make_app` gives an ASGI (Starlette) application to mount behind the web app's own
authentication; ``sa-jobqueue dashboard`` serves it on its own. Needs
``pip install 'sa-jobqueue[dashboard]'``. See docs/dashboard.md.
"""

from __future__ import annotations

from sa_jobqueue.dashboard.app import make_app

__all__ = ["make_app"]
