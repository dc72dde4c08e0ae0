"""The seam between an engine and its scheduler: a policy reads a view of one replica's state
and returns the plan of the next step; the engine applies the plan (frees the preempted
requests' blocks, reserves the decoders' and the chunks' blocks, admits) and prices the step
through the core's step price.

A policy only reads: neither the view nor the per-request arrays behind it are written until
the engine applies the plan. It is asked when there is something to decide (a request waits
or is prefilling, or the decoders' next blocks do not fit); a decode-only step with room for
its blocks runs without it, so the closed-form decode runs stay cheap. A plan says whether the
decoders run in its step (all of them, one token each: the engine's to price, a plan names
only the prefill chunks) or sit it out: a prefill-only step, whose time passes while they
emit nothing.

Adding a policy is one class with `schedule(view) -> StepPlan`, named in scheduler.POLICIES
(EngineConfig(policy=NAME) picks it; the engine makes one per replica). A policy honours
`view.chunked_prefill`: when it is off, a chunk is the whole rest of a prefill or nothing.
Three more parts are optional: `requeue_at_head`, a class attribute (default True: a preempted
request rejoins the queue at its head; False: at its tail), `recomputes` (default True: a
preempted request prefills its prompt and what it wrote again, which with chunked prefill off
one step must hold: run.check_whole_prefills), and `quiet_steps(view, most) -> int`, for a policy
under which a waiting queue can move before a request finishes: how many decode-only steps,
from the one about to run, may pass before it must be asked again (without it a queue the
policy left waiting stays so until a request finishes, and the engine leaps to that).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Protocol

from ridgeline.simulate.requests import Requests

Chunk = tuple[int, int, int]  # (request, new tokens, cached context): a prefill's share of a step


class SchedulerView(Protocol):
    """What a policy may read of one replica (the engine is one). Tokens and blocks are the
    engine's: a request holds ceil((cached tokens - spared) / block_tokens) blocks (Requests.spared)."""

    @property
    def reqs(self) -> Requests: ...  # per-request arrays: computed, target, held, spared, seq, ...

    @property
    def step(self) -> int: ...  # the step counter: the steps the decoders ran in

    @property
    def block_tokens(self) -> int: ...

    @property
    def blocks(self) -> int: ...  # the replica's KV blocks, all told (the shared prefix's aside)

    @property
    def free_blocks(self) -> int: ...

    @property
    def finished(self) -> Sequence[float]: ...  # finish times so far: its length counts them

    @property
    def done(self) -> Sequence[int]: ...  # the requests finished so far, in the order they did

    @property
    def n_decoding(self) -> int: ...  # sequences past their prefill, one token each step

    @property
    def prefilling(self) -> Sequence[int]: ...  # running requests still prefilling, in admission order

    @property
    def waiting(self) -> Sequence[int]: ...  # the queue, head first (preempted requests rejoin at the head)

    @property
    def max_num_seqs(self) -> int: ...

    @property
    def max_num_batched_tokens(self) -> int: ...

    @property
    def max_chunk_tokens(self) -> int: ...  # the most one request's chunk may take: a rank's budget

    @property
    def dp_ranks(self) -> int: ...  # ranks each with a chunked prefill of its own (1 but under DP attention)

    @property
    def chunked_prefill(self) -> bool: ...  # False: a prefill is scheduled whole or not at all

    def decode_blocks(self) -> int:
        """Fresh blocks the decoders take this step: one each whose last block is full."""
        ...

    def takes_block(self, rid: int) -> bool:
        """Whether decoding request `rid` is one of those."""
        ...

    def blocks_over(self, first: int, last: int) -> int:
        """Fresh blocks the decoders take over steps first .. last - 1, counted from the
        one about to run (0)."""
        ...

    def decode_tokens_left(self) -> int:
        """Tokens the decoders have still to write, all told (each writes one a step until
        its context reaches prompt + output)."""
        ...

    def held_blocks(self, rid: int) -> int:
        """Blocks running request `rid` holds: what preempting it frees."""
        ...

    def decoders(self) -> list[int]:
        """The decoding requests, in no particular order."""
        ...

    def latest_decoders(self) -> Iterator[int]:
        """Decoding requests, the most recently admitted first."""
        ...


# The next step, (preempt, chunks, decode), as the engine applies it: preempt these requests
# (by recompute, in this order: each rejoins the queue at its head), then run these prefill
# chunks, and the decoders if `decode` (when False the chunks are the whole step: the
# decoders' blocks are not reserved, and there must be a chunk). A chunk of a waiting request
# admits it (a request is admitted with its first chunk, in the order of the chunks). A plain
# tuple: a plan is made every step that needs one, and a class would cost a fifth of the
# policy's time.
StepPlan = tuple[Sequence[int], Sequence[Chunk], bool]


class Policy(Protocol):
    def schedule(self, view: SchedulerView) -> StepPlan:
        """The plan of the next step; reads `view`, writes nothing."""
        ...
