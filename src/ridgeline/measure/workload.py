"""What to send and when: prompts of exact token lengths, the grid of load points, and
arrival times.

Every request gets its own prompt, a seeded shuffle of common words, so no server can
answer it from a prefix cache; the word count is adjusted until the tokenizer counts
exactly the target. Load is closed-loop (C requests in flight, the next sent the moment
one finishes) or open-loop at a rate, with gamma-distributed gaps: shape 1 is Poisson,
below 1 burstier, above 1 more regular (vLLM's `--burstiness`).
"""

from __future__ import annotations

import random
import zlib
from dataclasses import dataclass
from typing import Any

from ridgeline.checks import check_number, check_size
from ridgeline.measure.tokens import Tokenizer

# Bounds on what a run may ask for: beyond them a typo, not a benchmark. Prompts are built
# in memory before the run starts (two words per token), and each slot of concurrency is a
# connection and a task.
MAX_TOKENS = 10_000_000  # prompt or output tokens of one request
MAX_CONCURRENCY = 100_000
MAX_REQUESTS = 1_000_000  # per load point
MAX_WARMUP = 10_000
RATE_RANGE = (1e-6, 1e6)  # requests per second
BURSTINESS_RANGE = (1e-3, 1e3)  # gamma shape: from near-all-at-once to near-clockwork

_COMMON = """
the of and to in is that it was for on are as with his they at be this from have or by one had
not but what all were when we there can an your which their said if do will each about how up
out them then she many some so these would other into has more her two like him see time could
no make than first been its who now people my made over did down only way find use may water
long little very after words called just where most know get through back much go good new
write our me man too any day same right look think also around another came come work three
word must because does part even place well such here take why things help put years different
away again off went old number great tell men say small every found still between name should
home big give air line set own under read last never us left end along while might next sound
below saw something thought both few those always looked show large often together asked house
world going want school important until form food keep children feet land side without boy once
animals life enough took sometimes four head above kind began almost live page got earth need
far hand high year mother light parts country father let night following picture being study
second eyes soon times story boys since white days ever paper hard near sentence better best
across during today others sure means knew its try told young miles sun ways thing whole hear
example heard several change answer room sea against top turned learn point city play toward
five using himself usually money seen car morning given river family
"""
WORDS = tuple(_COMMON.split())


@dataclass(frozen=True)
class Point:
    """One load point of the grid: a prompt length at a concurrency or a rate."""

    prompt_tokens: int
    concurrency: int | None = None
    rate_per_s: float | None = None

    @property
    def label(self) -> str:
        load = f"concurrency {self.concurrency}" if self.rate_per_s is None else f"{self.rate_per_s:g} req/s"
        return f"prompt {self.prompt_tokens:,} · {load}"

    def matches(self, rec: dict[str, Any]) -> bool:
        return (
            rec.get("target_prompt_tokens") == self.prompt_tokens
            and rec.get("concurrency") == self.concurrency
            and rec.get("rate_per_s") == self.rate_per_s
        )


def check_rate(rate_per_s: Any) -> float:
    lo, hi = RATE_RANGE
    return check_number("--rate", rate_per_s, lo=lo, hi=hi, hint=" (requests per second)")


def check_burstiness(burstiness: Any) -> float:
    lo, hi = BURSTINESS_RANGE
    return check_number("--burstiness", burstiness, lo=lo, hi=hi, hint=" (1 is Poisson)")


def check_point(p: Point) -> Point:
    check_size("--prompt-tokens", p.prompt_tokens, maximum=MAX_TOKENS)
    if p.concurrency is not None:
        check_size("--concurrency", p.concurrency, maximum=MAX_CONCURRENCY)
    if p.rate_per_s is not None:
        check_rate(p.rate_per_s)
    return p


def grid(prompts: list[int], concurrencies: list[int], rates: list[float] | None) -> list[Point]:
    """Every combination, prompt lengths ascending, then the load ascending; a value
    given twice runs once."""
    if rates:
        cap = max(concurrencies) if concurrencies else None
        points = [Point(p, cap, r) for p in sorted(set(prompts)) for r in sorted(set(rates))]
    else:
        points = [Point(p, c) for p in sorted(set(prompts)) for c in sorted(set(concurrencies))]
    return [check_point(p) for p in points]


def arrival_gaps_s(n: int, rate_per_s: float, burstiness: float, seed: int) -> list[float]:
    """Gaps between arrivals: gamma(shape k, scale 1/(k x rate)), mean 1/rate. The rate and
    the shape are checked first: gammavariate with a NaN shape never returns."""
    rate, shape = check_rate(rate_per_s), check_burstiness(burstiness)
    rng = random.Random(seed)
    return [rng.gammavariate(shape, 1.0 / (shape * rate)) for _ in range(n)]


def _words(seed: str, n: int) -> list[str]:
    rng = random.Random(seed)
    return [rng.choice(WORDS) for _ in range(n)]


async def exact_prompt(client: Any, tok: Tokenizer, target: int, seed: int) -> tuple[str, int]:
    """A prompt of `target` tokens by the tokenizer (or the closest reachable), and its
    count. The word count moves by the difference (bisecting once it brackets the target);
    when a two-token word straddles the target, another shuffle of words is tried."""
    best: tuple[int, str, int] | None = None
    for attempt in range(4):
        words = _words(f"{seed}/{attempt}", 2 * target + 16)
        lo, hi = 0, len(words) + 1  # counts below / above the target at these word counts
        k = min(max(target - tok.overhead, 1), len(words))
        while lo + 1 < hi:
            text = " ".join(words[:k])
            count = await tok.count(client, text)
            if best is None or abs(count - target) < best[0]:
                best = (abs(count - target), text, count)
            if count == target:
                return text, count
            lo, hi = (k, hi) if count < target else (lo, k)
            k = k + target - count
            if not lo < k < hi:
                k = (lo + hi) // 2
    assert best is not None
    return best[1], best[2]


def request_seed(run_seed: int, point: Point, request_id: int) -> int:
    """The same prompt for the same request of the same point, so --resume is exact."""
    load = point.concurrency if point.rate_per_s is None else point.rate_per_s
    return zlib.crc32(f"{run_seed}:{point.prompt_tokens}:{load}:{request_id}".encode())
