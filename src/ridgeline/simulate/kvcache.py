"""The paged KV cache: fixed blocks of tokens, as many as the core's memory plan leaves room for.

Like vLLM, a fraction of each GPU's memory (gpu_memory_utilization, 0.9) is planned for; the
weights, the peak activations of a full step and the runtime overhead come out of it, and the
rest holds the KV cache:

    blocks = room per GPU / (block tokens x KV bytes per token per GPU).

A model that mixes sliding-window and global layers is paged as vLLM's hybrid KV cache
manager (0.10 on), TensorRT-LLM's per-window pools and llama.cpp's SWA cache page it: a
block holds the global layers' keys and values for `block tokens` tokens, and a request's
sliding layers keep only the blocks of their last `window` tokens (plus the block being
written), which it holds apart from admission to the end:

    apart blocks = ceil(sum over sliding groups of
                        layers / global layers x ceil(min(window + block, tokens) / block)).

A model whose every layer slides (no global layer) is paged as before: every layer, every token.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ridgeline import ledger, memory, parallel
from ridgeline.architecture import Architecture
from ridgeline.checks import MAX_COUNT, MAX_TOKENS, check_fraction, check_size
from ridgeline.deployment import Deployment
from ridgeline.engines import Scheduler
from ridgeline.errors import RidgelineError

BLOCK_TOKENS = 16
MAX_BLOCK_TOKENS = 1024  # vLLM offers 8 to 128; the engine counts a block's residues one by one


@dataclass(frozen=True)
class KvCache:
    block_tokens: int
    blocks: int
    room_bytes_per_gpu: float  # usable - weights - activations - overhead
    bytes_per_token_per_gpu: float  # of the layers a block pages
    paged_layers: int = 0  # the layers a block pages (read only when windows are held apart)
    windows: tuple[tuple[int, int], ...] = ()  # the sliding groups held apart: (layers, window)

    @property
    def tokens(self) -> int:
        return self.blocks * self.block_tokens

    def apart_blocks(self, tokens: int) -> int:
        """Blocks a request of `tokens` tokens (prompt + output) holds for its sliding layers."""
        if not self.windows:
            return 0
        bs = self.block_tokens
        layer_blocks = sum(n * blocks_for(min(w + bs, tokens), bs) for n, w in self.windows)
        return -(-layer_blocks // self.paged_layers)


def blocks_for(tokens: int, block_tokens: int) -> int:
    """Blocks that hold `tokens`: ceil(tokens / block tokens)."""
    return -(-tokens // block_tokens)


def kv_cache(
    m: Deployment,
    block_tokens: int = BLOCK_TOKENS,
    utilization: float = memory.GPU_MEMORY_UTILIZATION,
    max_num_seqs: int = Scheduler.max_num_seqs,
    max_num_batched_tokens: int = Scheduler.max_num_batched_tokens,
) -> KvCache:
    """The cache a deployment has once the memory plan for a full step (max_num_seqs
    sequences sharing max_num_batched_tokens) has set the weights and activations aside.
    Kept on the deployment (`Deployment.kept`): a plan's trials and a search's screens ask
    again for the same cache."""
    key = ("kv cache", block_tokens, utilization, max_num_seqs, max_num_batched_tokens)
    if (found := m.kept.get(key)) is not None:
        return found
    check_size("--block-tokens", block_tokens, 1, MAX_BLOCK_TOKENS)
    check_size("--max-num-seqs", max_num_seqs, 1, MAX_COUNT)
    check_size("--max-num-batched-tokens", max_num_batched_tokens, 1, MAX_TOKENS)
    check_fraction("--gpu-memory-utilization", utilization)
    context = max(1, math.ceil(max_num_batched_tokens / max_num_seqs))
    p = memory.plan(m, context, max_num_seqs, utilization=utilization, suggest=False)
    g = p.per_gpu
    room = g.usable_bytes - g.weight_bytes - g.activation_bytes - g.overhead_bytes
    paged, windows = paged_layers(m.arch)
    per_token = ledger.kv_bytes_per_token(m.arch, m.prec) * paged / m.arch.layers
    per_token *= parallel.kv_share_per_gpu(m.arch, m.par)
    blocks = int(room // (block_tokens * per_token)) if room > 0 else 0
    if blocks <= 0:
        if g.usable_bytes - g.weight_bytes - g.overhead_bytes > 0:  # the step's activations crowd it out
            raise RidgelineError(
                f"a step of --max-num-seqs {max_num_seqs:,} sequences sharing --max-num-batched-tokens "
                f"{max_num_batched_tokens:,} needs {g.activation_bytes / 1e9:.3g} GB of activations, "
                f"leaving no room for a KV cache on {m.par.gpus}x {m.hw.name} "
                f"({g.usable_bytes / 1e9:.1f} GB usable per GPU): lower them"
            )
        stored = "its stored mix (file)" if m.prec.weights == "file" else m.prec.weights
        raise RidgelineError(
            f"{m.arch.name} in {stored} leaves no room for a KV cache on {m.par.gpus}x {m.hw.name} "
            f"(weights {g.weight_bytes / 1e9:.1f} GB of {g.usable_bytes / 1e9:.1f} GB usable per GPU): "
            "raise --tp or --gpu-memory-utilization, or choose narrower --weights"
        )
    found = m.kept[key] = KvCache(block_tokens, blocks, room, per_token, paged, windows)
    return found


def request_blocks(kv: KvCache, ranks: int, pinned: int) -> int:
    """The blocks one request may hold: the cache's or, under data-parallel attention over
    `ranks` GPUs, the one GPU's its cache sits on; less the shared prefix's `pinned` blocks,
    which every GPU holds."""
    return kv.blocks // ranks - pinned


def paged_layers(arch: Architecture) -> tuple[int, tuple[tuple[int, int], ...]]:
    """The layers a block pages, and the sliding groups (layers, window) each request holds
    apart: the global layers and the rest, or every layer and none when all are global or
    none is."""
    groups = arch.window_groups()
    paged = sum(n for n, w in groups if not w)
    if not paged or paged == arch.layers:
        return arch.layers, ()
    return paged, tuple((n, w) for n, w in groups if w)
