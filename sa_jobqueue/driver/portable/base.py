"""`PortableBase`: what every family of `PortableDriver` is built from."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from sa_jobqueue.core.limits import Limits
from sa_jobqueue.driver.portable.sql import Dialect
from sa_jobqueue.schema.model import JobMixin

__all__ = ["PortableBase"]


class PortableBase:
    """The jobs model, the claims' settings and the `Dialect`, shared by the family mixins.

    Built from the arguments of `registry.DriverFactory`; a family mixin reads these
    attributes and keeps any statements it builds on `self`.
    """

    #: The database's `Dialect`: set by the SQLite and MySQL drivers.
    sql: Dialect
    #: `Driver.supports_cascading_deletes`, which `jobs_prune` asks.
    supports_cascading_deletes: bool = True

    def __init__(
        self,
        model: type[JobMixin],
        *,
        leases: Mapping[str, float],
        default_lease: float,
        limits: Mapping[str, Limits] | None = None,
        kinds: Sequence[str] | None = None,
    ) -> None:
        self.model = model
        self.leases = dict(leases)
        self.default_lease = default_lease
        #: The limited kinds and their limits: `job_claim` leaves them to `job_claim_limited`.
        self.limited = {kind: limit for kind, limit in (limits or {}).items() if limit.limited}
        #: The only kinds `job_claim` claims (None: any).
        self.kinds = tuple(kinds) if kinds is not None else None

    def lease_of(self, kind: str) -> float:
        """The lease, in seconds, of a job of `kind`."""
        return self.leases.get(kind, self.default_lease)
