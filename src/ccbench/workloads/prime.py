"""prime: the seed-000 SimplePrime CPU validation (first N primes by trial division), in-process.

Its job is to show run-to-run variance of a pure-CPU Python loop: the same work every time.
"""

from __future__ import annotations

import time

from pydantic import Field

from ccbench.model import Measurement
from ccbench.workloads.base import ExecutionContext, Workload, WorkloadFailed, WorkloadParams


class PrimeParams(WorkloadParams):
    n: int = Field(100_000, ge=1, le=10_000_000, description="how many primes to find")


def first_primes(n: int) -> list[int]:
    """The seed's algorithm: trial division by every integer up to the square root."""
    primes: list[int] = []
    candidate = 2
    while len(primes) < n:
        is_prime = True
        for divisor in range(2, int(candidate**0.5) + 1):
            if candidate % divisor == 0:
                is_prime = False
                break
        if is_prime:
            primes.append(candidate)
        candidate += 1
    return primes


class Prime(Workload):
    kind = "prime"
    description = "SimplePrime CPU validation (first N primes, N=100000), measured in-process"
    Params = PrimeParams
    #: the time to find the primes is the result; cpu_time explains it
    primary_metrics = ("time",)

    def run(self, ctx: ExecutionContext) -> list[Measurement]:
        start = time.perf_counter()
        cpu_start = time.process_time()
        primes = first_primes(self.params.n)
        elapsed = time.perf_counter() - start
        cpu = time.process_time() - cpu_start
        if len(primes) != self.params.n:
            raise WorkloadFailed(f"found {len(primes)} primes, expected {self.params.n}")
        return [
            Measurement(metric="time", unit="s", value=elapsed, metadata={"last_prime": primes[-1]}),
            Measurement(metric="cpu_time", unit="s", value=cpu),
        ]
