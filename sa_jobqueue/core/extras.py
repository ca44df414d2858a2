"""How to install an optional extra, said the same way in every error that needs one."""

from __future__ import annotations

__all__ = ["install_hint"]


def install_hint(extra: str) -> str:
    """The command that installs `extra`, from PyPI and from a checkout.

    >>> print(install_hint("otel"))
    pip install 'sa-jobqueue[otel]' (in a checkout of sa-jobqueue: pip install -e '.[otel]')
    """
    return (
        f"pip install 'sa-jobqueue[{extra}]' "
        f"(in a checkout of sa-jobqueue: pip install -e '.[{extra}]')"
    )
