"""Every request's state as parallel arrays (plain lists indexed by request id): what arrives,
where the engine has got to, and when its tokens came out. No object per request or token.

Token convention (the core's): a request with output M runs M decode steps after its
prefill and emits M + 1 tokens, the prefill emitting the first.
"""

from __future__ import annotations

from dataclasses import dataclass, field

WAITING, PREFILL, DECODE, DONE = 0, 1, 2, 3


@dataclass
class Requests:
    # what arrives
    arrival_s: list[float] = field(default_factory=list)
    prompt: list[int] = field(default_factory=list)
    output: list[int] = field(default_factory=list)  # M, decode steps
    hit: list[int] = field(default_factory=list)  # prompt tokens found in the prefix cache
    # tokens the request's own blocks spare: those of its hit in shared (pinned) blocks, less
    # a block's tokens for each block its sliding layers hold apart (kvcache.KvCache.apart_blocks);
    # it holds ceil((cached tokens - spared) / block tokens) blocks
    spared: list[int] = field(default_factory=list)
    client: list[int] = field(default_factory=list)  # closed loop: who sent it; -1 otherwise
    # where the engine has got to
    state: list[int] = field(default_factory=list)
    computed: list[int] = field(default_factory=list)  # tokens whose KV is cached (prefill phase)
    target: list[int] = field(default_factory=list)  # tokens the (re)prefill must reach
    emitted: list[int] = field(default_factory=list)  # tokens emitted before this (re)prefill
    held: list[int] = field(default_factory=list)  # KV blocks held (prefill phase)
    base: list[int] = field(default_factory=list)  # decode phase: context = step counter - base
    first_step: list[int] = field(default_factory=list)  # decode phase: the first step counter
    seq: list[int] = field(default_factory=list)  # admission order (preemption takes the latest)
    last_step: list[int] = field(default_factory=list)  # decode phase: the counter of its last step
    # what came out
    replica: list[int] = field(default_factory=list)
    admit_s: list[float] = field(default_factory=list)
    first_s: list[float] = field(default_factory=list)
    finish_s: list[float] = field(default_factory=list)
    preemptions: list[int] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.arrival_s)

    def add(
        self, arrival_s: float, prompt: int, output: int, hit: int = 0, shared: int = 0, client: int = -1
    ) -> int:
        """Append one request; returns its id."""
        nan = float("nan")
        self.arrival_s.append(arrival_s)
        self.prompt.append(prompt)
        self.output.append(output)
        self.hit.append(hit)
        self.spared.append(shared)
        self.client.append(client)
        for column, value in (
            (self.state, WAITING),
            (self.computed, hit),
            (self.target, prompt),
            (self.emitted, 0),
            (self.held, 0),
            (self.base, 0),
            (self.first_step, 0),
            (self.seq, 0),
            (self.last_step, 0),
            (self.replica, 0),
            (self.preemptions, 0),
        ):
            column.append(value)
        for times in (self.admit_s, self.first_s, self.finish_s):
            times.append(nan)
        return len(self.arrival_s) - 1

    def extend(
        self,
        arrival_s: list[float],
        prompt: list[int],
        output: list[int],
        hit: list[int],
        shared: list[int],
    ) -> None:
        """Append many open-loop requests at once."""
        n = len(arrival_s)
        nan = float("nan")
        self.arrival_s += arrival_s
        self.prompt += prompt
        self.output += output
        self.hit += hit
        self.spared += shared
        self.client += [-1] * n
        self.state += [WAITING] * n
        self.computed += hit
        self.target += prompt
        for column in (
            self.emitted,
            self.held,
            self.base,
            self.first_step,
            self.seq,
            self.last_step,
            self.replica,
            self.preemptions,
        ):
            column += [0] * n
        for times in (self.admit_s, self.first_s, self.finish_s):
            times += [nan] * n
