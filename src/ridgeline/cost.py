"""Dollars per million tokens from a price per GPU-hour.

Input tokens are paid for by the prefill: TTFT of GPU time buys batch x prompt tokens.
Output tokens by decode: each step of TPOT buys one token for each of the batch.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Cost:
    """Dollars per million input and output tokens at a price per GPU-hour."""

    price_per_gpu_hour_usd: float
    gpus: int
    usd_per_million_input_tokens: float
    usd_per_million_output_tokens: float


def token_cost(
    price_per_gpu_hour_usd: float, gpus: int, ttft_s: float, tpot_s: float, prompt: int, batch: int
) -> Cost:
    usd_per_s = price_per_gpu_hour_usd * gpus / 3600.0
    return Cost(
        price_per_gpu_hour_usd=price_per_gpu_hour_usd,
        gpus=gpus,
        usd_per_million_input_tokens=usd_per_s * ttft_s / (batch * prompt) * 1e6,
        usd_per_million_output_tokens=usd_per_s * tpot_s / batch * 1e6,
    )
