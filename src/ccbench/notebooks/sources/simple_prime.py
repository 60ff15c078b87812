# %% [markdown]
# # SimplePrime
# Data: none; pure CPU work. This is seed 000's validation notebook rewritten for ccbench:
# count the primes below a bound by trial division, in plain Python, so that the notebook
# harness itself can be validated against the `prime` workload.

# %% tags=["parameters"]
size = "full"

# %%
import math
import time

LIMITS = {"quick": 20_000, "full": 2_000_000}
limit = LIMITS[size]

# %%
def is_prime(n):
    if n < 2:
        return False
    if n % 2 == 0:
        return n == 2
    for divisor in range(3, math.isqrt(n) + 1, 2):
        if n % divisor == 0:
            return False
    return True

# %%
count = sum(1 for n in range(limit) if is_prime(n))
count

# %%
# the known prime counts: pi(2e4) = 2262, pi(2e6) = 148933
expected = {20_000: 2262, 2_000_000: 148933}[limit]
assert count == expected, (count, expected)
print(f"{count} primes below {limit}")
