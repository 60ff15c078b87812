"""The microservices workload's parameters: the dataset, the request mix, the load and the placement."""

from __future__ import annotations

import math
from typing import Literal

from pydantic import Field, field_validator, model_validator

from ccbench.workloads.base import WorkloadParams

#: the request mix's operations and the URL (path and query; a rand_regex pattern) each one requests;
#: USER is replaced by a pattern over the dataset's user ids
OPERATIONS: dict[str, str] = {
    "home_timeline": r"/wrk2-api/home-timeline/read\?user_id=USER&start=0&stop=10",
    "user_timeline": r"/wrk2-api/user-timeline/read\?user_id=USER&start=0&stop=10",
    "compose_post": r"/wrk2-api/post/compose\?user_id=USER&text=[a-z]{32}",
    "follow": r"/wrk2-api/user/follow\?user_id=USER&followee_id=USER",
}
#: DeathStarBench social network's mixed workload: mostly timeline reads, some posts, a few follows
DEFAULT_MIX = {"home_timeline": 60, "user_timeline": 30, "compose_post": 9, "follow": 1}
TIERS = ("nginx", "app", "memcached", "redis", "postgres")


class MicroservicesParams(WorkloadParams):
    #: "local": every tier on loopback (no root needed); "emulated": each tier on its own emulated host
    #: (network namespace) and the load generator on an "edge" host (needs root)
    hosts: Literal["local", "emulated"] = "local"
    #: the edge link (load generator <-> front end) with hosts = "emulated": one-way delay and rate in
    #: tc's units ("5ms", "100mbit"); unset for a LAN
    edge_delay: str | None = None
    edge_rate: str | None = None
    #: users in the dataset: a power of ten (ids 0..users-1 are drawn digit by digit by the load generator)
    users: int = Field(1000, ge=10)
    posts_per_user: int = Field(10, ge=1)
    mean_follows: int = Field(20, ge=1)
    #: Zipf exponent of how popular users are as followees (> 1; larger = a heavier head)
    follow_zipf: float = Field(1.2, gt=1.0)
    seed: int = 1
    #: operation -> integer weight (see OPERATIONS); DeathStarBench's mixed workload by default
    mix: dict[str, int] = Field(default_factory=lambda: dict(DEFAULT_MIX))
    #: absolute request rates (req/s) for the open-loop sweep; when empty, rate_fractions of a capacity
    #: probed in prepare (once per bundle, on the first variant prepared) are used
    rates: list[float] = Field(default_factory=list)
    rate_fractions: list[float] = Field(default_factory=lambda: [0.25, 0.5, 0.75, 0.9])
    capacity_seconds: float = Field(5.0, gt=0)
    #: seconds of load per rate
    duration: float = Field(10.0, gt=0)
    #: open-loop connections (oha -c): enough that queueing happens in the service, not in the client
    connections: int = Field(32, ge=1)
    #: a request not answered in this many seconds counts as an error
    request_timeout: float = Field(5.0, gt=0)
    #: also drive the chain closed-loop with wrk (as the seed did)
    closed_loop: bool = True
    wrk_threads: int = Field(2, ge=1)
    wrk_connections: int = Field(16, ge=1)
    wrk_duration: float = Field(10.0, gt=0)
    #: an execution fails when more than this share of a rate's requests failed (errors are recorded either way)
    max_error_ratio: float = Field(0.001, ge=0, le=1)
    nginx_workers: int = Field(1, ge=1)
    app_pool: int = Field(32, ge=1)

    @field_validator("users")
    @classmethod
    def _power_of_ten(cls, value: int) -> int:
        digits = len(str(value)) - 1
        if value != 10**digits:
            raise ValueError(f"users must be a power of ten (10, 100, 1000, ...), not {value}")
        return value

    @field_validator("mix")
    @classmethod
    def _known_operations(cls, value: dict[str, int]) -> dict[str, int]:
        unknown = sorted(set(value) - set(OPERATIONS))
        if unknown:
            raise ValueError(f"unknown mix key(s) {', '.join(unknown)}; known: {', '.join(OPERATIONS)}")
        if any(w < 0 for w in value.values()) or sum(value.values()) <= 0:
            raise ValueError("mix weights must be integers >= 0 with a positive sum")
        return value

    @field_validator("rates", "rate_fractions")
    @classmethod
    def _positive(cls, value: list[float]) -> list[float]:
        bad = [v for v in value if not (v > 0 and math.isfinite(v))]
        if bad:
            raise ValueError(f"rates must be positive request rates, not {', '.join(f'{v:g}' for v in bad)}")
        return value

    @model_validator(mode="after")
    def _edge_shape(self):
        if self.edge_delay or self.edge_rate:
            if self.hosts != "emulated":
                raise ValueError('edge_delay and edge_rate need hosts = "emulated"')
            from ccbench.basics.errors import CCBenchError
            from ccbench.topology import LinkShape

            try:
                LinkShape(rate=self.edge_rate, delay=self.edge_delay)
            except CCBenchError as exc:
                raise ValueError(str(exc)) from None
        return self

    @model_validator(mode="after")
    def _some_load(self):
        if not self.rates and not self.rate_fractions and not self.closed_loop:
            raise ValueError("nothing to run: give rates or rate_fractions, or closed_loop = true")
        return self
