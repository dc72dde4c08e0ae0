"""Time from the ledger: time = max(FLOPs / (eta_c * peak), bytes / (eta_b * bandwidth)).

The ridge is peak / bandwidth in FLOPs per byte: a pass whose intensity lies above it
waits on arithmetic (compute-bound), below it on memory (memory-bound). This is the
lesson's method: one roofline over a whole pass (`step.price` chooses it or the per-op
ledger by the deployment's method). Under an engine profile (its Rates say `apart`) the
matmuls and attention are kernels run one after the other, each on its own roofline:

    time = max(matmul FLOPs, weight bytes) + max(attention FLOPs, KV bytes)   (each at its rate)

which is the same time whenever both wait on the same thing, and longer where a large
batch's matmuls wait on arithmetic while attention waits on the KV cache.
"""

from __future__ import annotations

from dataclasses import dataclass

from ridgeline._num import Num, maximum, where
from ridgeline.efficiency import Rates
from ridgeline.ledger import Work
from ridgeline.parallel import comm_time_s, gpu_share

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ridgeline.deployment import Deployment


@dataclass  # made per pass, may hold arrays: plain (see _num.Num)
class StepTime:
    """One pass priced on a deployment. FLOPs and bytes are the whole model's; the rest is
    one GPU's (a GPU of one pipeline stage): its bytes, and its time split into compute,
    weight reads, KV reads, other memory traffic, communication and fixed overhead."""

    flops: Num
    bytes: Num
    compute_s: Num
    weight_s: Num
    kv_s: Num
    comm_s: Num
    overhead_s: float = 0.0
    other_s: Num = 0.0  # activations' traffic, which only the per-op ledger counts
    weight_bytes_per_gpu: Num = 0.0
    kv_bytes_per_gpu: Num = 0.0
    ops_s: Num | None = None  # per-op method: the sum of each operator's own roofline time
    attention_flops: Num = 0.0  # the part of `flops` that is attention (scores and values)
    attention_s: Num = 0.0  # the part of `compute_s` that is attention, when timed apart
    host_s: Num = 0.0  # the host's work, overlapped with the GPU's: the pass takes at least this

    @property
    def memory_s(self) -> Num:
        return self.weight_s + self.kv_s + self.other_s

    @property
    def gpu_s(self) -> Num:
        """The GPU's time: its roofline (or the operators' sum), communication and overhead."""
        roof = maximum(self.compute_s, self.memory_s) if self.ops_s is None else self.ops_s
        return roof + self.comm_s + self.overhead_s

    @property
    def time_s(self) -> Num:
        """The GPU's time, or the host's where the host is the slower (an engine's overlap)."""
        gpu, host = self.gpu_s, self.host_s
        return gpu if isinstance(host, (int, float)) and host <= 0 else maximum(gpu, host)

    @property
    def host_bound(self) -> Num:
        """Whether the host's work, not the GPU's, sets the pass's time."""
        return self.host_s > self.gpu_s

    @property
    def waits_on(self) -> Num:
        """What sets the pass's time: "host" where the host's work outlasts the GPU's, else
        the roofline's bound ("compute" or "memory")."""
        return where(self.host_bound, "host", self.bound)

    @property
    def intensity(self) -> Num:
        return self.flops / self.bytes

    @property
    def bound(self) -> Num:
        return where(self.compute_s >= self.memory_s, "compute", "memory")

    @property
    def ridge(self) -> Num:
        """The pass's own ridge: the intensity at which its compute and memory times would
        meet at the rates its work reaches (intensity x memory time / compute time). Under
        the presets it is the effective ridge; under an engine profile each shape reaches
        its own shares of the peak, so the pass is compute-bound exactly when above it."""
        return self.intensity * self.memory_s / self.compute_s


def time_work(work: Work, m: Deployment, rates: Rates | None = None) -> StepTime:
    """Time one pass at the deployment's rates (`pass_rates`). Each pipeline stage runs on
    its own GPUs in turn, so the pass takes pp stage times; each stage's GPU holds its
    share of the work (parallel.gpu_share)."""
    r = rates or pass_rates(m, work.tokens)
    par = m.par
    flops = work.flops
    share = gpu_share(
        m.arch,
        par,
        flops=flops,
        weight_bytes=work.weight_bytes,
        expert_weight_bytes=work.expert_weight_bytes,
        expert_flops=work.expert_flops,
        attention_flops=work.attention_flops,
        attention_linear_flops=work.attention_linear_flops,
        attention_weight_bytes=work.attention_weight_bytes,
        kv_bytes=work.kv_read_bytes + work.kv_write_bytes,
        tokens=work.tokens,
        sequences=work.sequences,
    )
    attention_s: Num = 0.0
    one_rate = r.linear_flops_per_s is r.attention_flops_per_s is r.expert_flops_per_s
    if one_rate and not r.apart:  # one rate for all, and one roofline
        compute_s = par.pp * share.flops / r.linear_flops_per_s
    else:  # each kind of arithmetic at its own rate
        expert_rate = r.linear_flops_per_s if r.expert_flops_per_s is None else r.expert_flops_per_s
        dense_s = (share.flops - share.expert_flops - share.attention_flops) / r.linear_flops_per_s
        attention_s = par.pp * share.attention_flops / r.attention_flops_per_s
        expert_s = share.expert_flops / expert_rate
        compute_s = par.pp * (dense_s + expert_s) + attention_s
    weight_s = par.pp * share.weight_bytes / r.weight_bytes_per_s
    kv_s = par.pp * share.kv_bytes / r.kv_bytes_per_s
    ops_s = None
    if r.apart:  # the matmuls on their roofline, then attention on its own
        ops_s = maximum(compute_s - attention_s, weight_s) + maximum(attention_s, kv_s)
    return StepTime(
        flops=flops,
        bytes=work.bytes,
        compute_s=compute_s,
        weight_s=weight_s,
        kv_s=kv_s,
        ops_s=ops_s,
        attention_s=attention_s,
        comm_s=comm_s(m, work.tokens, r),
        overhead_s=r.overhead_s,
        weight_bytes_per_gpu=share.weight_bytes,
        kv_bytes_per_gpu=share.kv_bytes,
        attention_flops=work.attention_flops,
        host_s=r.host_s,
    )


def comm_s(m: Deployment, tokens: Num, r: Rates) -> Num:
    """A pass's communication at these rates' collective latency and link bytes/s."""
    return comm_time_s(m.arch, m.prec, m.hw, tokens, m.par, r.collective_latency_s, r.link_bytes_per_s)


def pass_rates(m: Deployment, tokens: Num, sequences: Num = 1) -> Rates:
    """The rates a pass of `tokens` new tokens over `sequences` sequences reaches: the
    engine profile's when the deployment has one, else the flat fractions of its preset or
    calibration."""
    if m.engine is not None:
        return m.engine.rates(m, tokens, sequences)
    return m.flat_rates
