"""How close the engine profiles come to published measurements: every corpus row, its
predicted and measured value and the signed error, in-sample and with the row's source left
out of the fit; then the median and worst error by regime and by engine.

Run: python benchmarks/accuracy.py [--rows] [--markdown] [--checks] [--beyond] [--newer]
[--serving] [--dp-attention] [--amd] [--small] [--itl] [--apple] [--json]
(the README's accuracy tables are its --markdown and --rows --markdown output, pasted by hand;
--json prints every row or cell and the summaries as strict JSON, with the keys the README
lists)

--checks does the same for the corpus's sources kept as independent checks (corpus.CHECKS:
GPUStack's Qwen3-14B and Qwen3-32B pages, its DeepSeek-R1 page, its Qwen3-235B-A22B pages
and its GLM pages), which no profile was fitted to: the fitted profile's prediction is their held-out
one, and the summary adds each source, accelerator and model. The bands are made of every
held-out row, the check sources' among them, so it also rebuilds them without each check
source in turn, and without each of every source, and says how many of that source's rows
they hold.

--beyond predicts the cells of a corpus source's table that the corpus does not hold: the
TensorRT-LLM 1.0 throughput table (perf-overview.md @00f37686): its FP8 cells for Llama 3.1
8B and 70B on H100 and H200, and 405B at TP 8 on both (49 cells beside the corpus's 11), and
its FP4 cells for Llama 3.3 70B and Qwen3-30B-A3B on B200 and GB200, and Llama 3.1 405B at
TP 4 on both (57 beside 3); and, summarised apart, its larger MoE blocks: Llama 4 Scout
in FP4 at TP 1 on B200 and GB200 and in FP8 at TP 4 on H200 and H100, Maverick and
Qwen3-235B-A22B in FP4 at TP 8 on B200 and in FP8 at TP 8 on H200 and H100 (90 cells; the
page runs them with attention data parallelism, and so are they priced where TP > 1). They
are not independent of the fit (their source is in it), so the held-out figure, the profile
fitted without that source, is the one to read: how well the model carries across lengths,
and across models, within one engine version.

--newer predicts the cells of TensorRT-LLM's current throughput table (perf-overview.md
@03e27c7d) for models and accelerators the catalogue holds: Llama 3.3 70B in FP8 at TP 2 on
H200 and H100, in NVFP4 at TP 1 on B200, GB200 and one RTX PRO 6000 Blackwell, and
Qwen3-30B-A3B in NVFP4 on those three (35 cells), and gpt-oss-20b and -120b in MXFP4 at TP 1
(33 cells: the 20B on B200, GB200, H200 and H100, the 120B on GB200 and H200). No corpus row
comes from that table or its engine version, and none ran on an RTX PRO 6000.

--amd predicts, with vLLM's profile, the throughput table of six releases of AMD's ROCm
performance page (Llama 3.1 70B and 405B in FP8 at TP 8 on MI300X) and the Oracle blog's
405B latency by batch, every cell the corpus does not hold; the held-out column is the fold
without the cell's own source.

--serving predicts TensorRT-LLM 0.14's online-serving table (the same perf-overview page's
0.15 and 0.17 versions, "generated using version 0.14.0, with 500 requests and BF16"):
Llama 3.1 8B at TP 1 and 70B at TP 4 on H100 and H200, three length pairs, 2 to 32 queries a
second (60 points; its INF rows are offline runs and left out), served through Triton's
TensorRT-LLM backend. Its mean TTFT and mean inter-token latency are simulated under
Poisson arrivals of 500 requests and read as means. The profile's first-token cost is
trtllm-serve's; Triton's is not in the corpus, so the low-load TTFTs carry that difference.
No corpus row is an open-loop TensorRT-LLM run.

--dp-attention predicts the SGLang runs of GPUStack's DeepSeek-R1 page (a check source) that
served with --tp 8 --enable-dp-attention (five: ShareGPT, and random 32K, 4K, 2K and 128
prompts), and TensorRT-LLM's three DeepSeek-R1 max-throughput recipes with
enable_attention_dp (one on eight H200s, two on eight B200s), each with the fitted profile
under --dp-attention and, beside it, at TP alone.

--small predicts the vLLM tables of the Qwen2.5 speed benchmark (a corpus source, J01-J07,
which holds its 7B and 72B cells) for the models the corpus has no row of: Qwen2.5-0.5B,
1.5B and 3B at batch 1 on one A100, 2,048 tokens generated after 1 to 30,720 in, in BF16 and
in GPTQ-Int8, GPTQ-Int4 and AWQ (at one token in), and the 7B's BF16 cells at the two input
lengths the corpus skips (23 cells). A 0.5B model's weights stream in half a millisecond on
an A100, so its 3.2 ms a token is the step's fixed costs, which the profile's other rows fix
only beside weights 15 to 1,000 times as large. The held-out column is the fold without the
benchmark's page.

--itl simulates the P99 inter-token latency of the corpus's concurrency-4 runs on GPUStack's
pages (F14, F15, F16, N07: SGLang, vLLM and TensorRT-LLM on Qwen3-8B, vLLM on gpt-oss-120b,
one H100 each), which those pages print beside the median TTFT the corpus holds; no profile
was fitted to a tail of ITL.

--apple predicts llama.cpp's llama-bench on an M2 Ultra from two of llama.cpp's own pull
requests (3084, September 2023: Llama 7B in F16, Q8_0 and Q4_0, pp512; 10238, November 2024:
Llama 3.2 3B in F16 and Q4_0, pp512 and tg128; 7 cells): another lab, other models and other
builds than the corpus's only Apple rows. The held-out column is the fold without those rows'
source, whose Apple terms then fall back to their priors.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from typing import Any

from ridgeline.accuracy import corpus, report
from ridgeline.engines import EngineProfile, builtin_engines

BEYOND_GROUP = "TensorRT-LLM 1.0 docs"
# a corpus row of that table for each precision: trtllm-bench offline, fp8 weights, maths and
# KV (ModelOpt FP8), or NVFP4 weights and maths with an fp8 KV (ModelOpt FP4)
FP8, FP4 = "C01", "D27"
# Total output tokens/s of trtllm-bench throughput, ModelOpt FP8 or FP4 checkpoints, by
# (template, model, accelerator, TP) and (input, output); the requests per length pair are
# the doc's own.
BEYOND_REQUESTS = {(128, 128): 30000, (128, 2048): 3000, (128, 4096): 1500, (500, 2000): 3000,
                   (1000, 1000): 3000, (1000, 2000): 1500, (2048, 128): 3000, (2048, 2048): 1500,
                   (5000, 500): 1500, (20000, 2000): 1000}  # fmt: skip
BEYOND_LENGTHS = tuple(BEYOND_REQUESTS)
BEYOND = {
    (FP8, "llama-3.1-8b", "h100-sxm", 1): (28312, 22714, 14325, 17660, 15220, 13899, 3450, 9305, 3459, 1351),
    (FP8, "llama-3.1-8b", "h200", 1): (27911, 26221, 18027, 20770, 17744, 16828, 3538, 12194, 3902, 1804),
    (FP8, "llama-3.1-70b", "h100-sxm", 2): (6378, 6651, 4199, 5222, 4205, 4146, 762, 3082, 898, 437),
    (FP8, "llama-3.1-70b", "h200", 1): (3803, 4336, 2872, 3666, 2909, 2994, 442, 2003, 566, 283),
    (FP8, "llama-3.1-405b", "h200", 8): (3814, 5348, 4741, 4724, 3330, 3722, 456, 2948, 650, 505),
    (FP8, "llama-3.1-405b", "h100-sxm", 8): (3627, 4340, 3116, 3994, 2919, 2895, 453, 2296, 610, 345),
    (FP4, "llama-3.1-70b", "b200", 1): (11147, 9922, 6831, 7762, 7007, 6271, 1339, 4783, 1459, 665),
    (FP4, "llama-3.1-70b", "gb200", 1): (12189, 11309, 7849, 9028, 7326, 6513, 1450, 5646, 1602, 755),
    (FP4, "qwen3-30b-a3b", "b200", 1): (39827, 37844, 24953, 27817, 25828, 22051, 6251, 17554, 6142, 2944),
    (FP4, "llama-3.1-405b", "b200", 4): (6281, 8020, 6345, 6244, 5209, 4933, 749, 4212, 1048, 672),
    (FP4, "llama-3.1-405b", "gb200", 4): (6740, 8151, 6608, 6540, 5389, 5135, 797, 4407, 1112, 739),
    (FP4, "qwen3-30b-a3b", "gb200", 1): (24107, 31311, 26337, 20604, 17481, 17177, 6595, 14719, 5908, 3203),
}  # fmt: skip
# The same table's Llama 4 and Qwen3-235B-A22B blocks (None: a cell the table leaves blank).
# The page runs MoE models with trtllm-bench --tp and --ep and `enable_attention_dp: true` in
# its options file; here they are priced at the table's TP with attention data-parallel over
# it (the experts split by TP: the page does not give its --ep).
BEYOND_MOE = {
    (FP4, "llama-4-scout", "b200", 1): (25342, 14699, 8932, 11977, 10591, 9356, 3137, 7152, 2937, 1644),
    (FP4, "llama-4-scout", "gb200", 1): (19954, 15238, 9556, 11795, 7738, 8581, 3295, 7464, 3107, 1767),
    (FP8, "llama-4-scout", "h200", 4): (30354, 34316, 21332, 24630, 21636, 18499, 3699, 14949, 4605, 2105),
    (FP8, "llama-4-scout", "h100-sxm", 4): (None, 15130, 8603, 12399, 12129, 9838, 3253, 7972, 3342, None),
    (FP4, "llama-4-maverick", "b200", 8):
        (124323, 112676, 68170, None, 79617, 63766, 18088, 52195, None, 12678),
    (FP8, "llama-4-maverick", "h200", 8): (63994, 40572, 24616, 37835, 31782, 34734, 7307, 20957, 8456, 4106),
    (FP8, "llama-4-maverick", "h100-sxm", 8): (None, 10829, 6744, 10108, 9677, 9151, None, 6916, 3457, None),
    (FP4, "qwen3-235b-a22b", "b200", 8): (63362, 66057, 39496, 57117, 42391, 34105, 7329, 26854, 8190, 4453),
    (FP8, "qwen3-235b-a22b", "h200", 8): (30429, 42821, 26852, 28026, 23789, 22061, 3331, 16672, 3623, 1876),
    (FP8, "qwen3-235b-a22b", "h100-sxm", 8):
        (None, 19658, 12447, 18351, 14898, 15136, None, 9924, 3225, None),
}  # fmt: skip
MOE_BLOCKS = {(model, tp) for _, model, _, tp in BEYOND_MOE}


# TensorRT-LLM's current perf-overview (docs/source/developer-guide/perf-overview.md @03e27c7d,
# trtllm-bench, PyTorch backend, ModelOpt checkpoints): output tokens/s per GPU, by (template,
# model, accelerator, TP) and (input, output); the requests per length pair are the doc's own
# (1,000/1,000 takes 1,024/1,024's). No corpus row comes from it: a held-out check of a later
# engine version than any the profile was fitted to.
# GPUStack's DeepSeek-R1 page (deepseek-r1/h200.md @a5c9fafc, a check source), SGLang 0.5.3 on
# eight H200s with `--tp 8 --enable-dp-attention`: '2. Parallelism in SGLang' (ShareGPT) and
# the optimized configuration's 'Other Benchmark Cases' (random lengths), total token
# throughput, each on the mapping of the page's row at those lengths: (row, input, output,
# requests, tokens/s).
DP_ATTENTION_CHECKS = (
    ("R02", 219, 201, 1000, 7143.30),
    ("R04", 31999, 100, 100, 16091.68),
    ("R05", 3995, 200, 500, 16096.80),
    ("R06", 1997, 100, 500, 19024.33),
    ("R07", 127, 4, 1000, 20448.42),
)
# TensorRT-LLM's DeepSeek-R1 max-throughput recipes with enable_attention_dp at TP 8 and EP 8
# (docs/source/blogs/Best_perf_practice_on_DeepSeek-R1_in_TensorRT-LLM.md @01c4ece9: trtllm-bench,
# 1,024 tokens in and 2,048 out, "--max_batch_size: Max batch size in each rank", concurrency
# eight times it; "Total Output Throughput"): (accelerator, weights, maths, KV dtype,
# max_batch_size, max_num_tokens, requests, tokens a second). DeepSeek-R1 has DeepSeek-V3's
# shapes; its FP8 checkpoint is block-scaled fp8, the NVFP4 one priced as fp4-g32 throughout.
DP_ATTENTION_TRTLLM = (
    ("h200", "fp8", "fp8", "bf16", 128, 1151, 5120, 11489.2671),
    ("b200", "fp4-g32", "fp4", "bf16", 384, 1536, 49152, 36384.0838),
    ("b200", "fp4-g32", "fp4", "fp8", 896, 2048, 114688, 43146.2042),
)
SERVING_TEMPLATE = "U01"  # TensorRT-LLM 0.15's table: its TensorRT engines, scheduler and graphs
SERVING_GROUP = "TensorRT-LLM 0.15 docs"  # its page, left out for the held-out column
# (model, accelerator, TP, input, output): (queries a second, mean TTFT ms, mean ITL ms)
SERVING = {
    ("llama-3.1-70b", "h100-sxm", 4, 467, 256):
        ((2, 62, 21), (4, 68, 24), (8, 92, 32), (16, 175, 66), (32, 1229, 86)),
    ("llama-3.1-70b", "h100-sxm", 4, 467, 16):
        ((2, 53, 18), (4, 58, 20), (8, 71, 24), (16, 109, 38), (32, 1197, 482)),
    ("llama-3.1-70b", "h100-sxm", 4, 202, 214):
        ((2, 48, 20), (4, 51, 22), (8, 57, 25), (16, 74, 32), (32, 116, 42)),
    ("llama-3.1-8b", "h100-sxm", 1, 467, 256):
        ((2, 23, 8), (4, 24, 9), (8, 26, 9), (16, 30, 11), (32, 50, 19)),
    ("llama-3.1-8b", "h100-sxm", 1, 467, 16): ((2, 19, 7), (4, 20, 7), (8, 22, 7), (16, 24, 8), (32, 29, 10)),
    ("llama-3.1-8b", "h100-sxm", 1, 202, 214):
        ((2, 19, 7), (4, 20, 8), (8, 21, 9), (16, 23, 10), (32, 27, 11)),
    ("llama-3.1-70b", "h200", 4, 467, 256):
        ((2, 58, 18), (4, 63, 20), (8, 84, 27), (16, 165, 60), (32, 1279, 83)),
    ("llama-3.1-70b", "h200", 4, 467, 16):
        ((2, 50, 15), (4, 55, 16), (8, 67, 20), (16, 103, 33), (32, 1259, 485)),
    ("llama-3.1-70b", "h200", 4, 202, 214):
        ((2, 43, 17), (4, 46, 18), (8, 51, 21), (16, 67, 28), (32, 112, 39)),
    ("llama-3.1-8b", "h200", 1, 467, 256): ((2, 21, 6), (4, 23, 7), (8, 24, 7), (16, 27, 9), (32, 44, 16)),
    ("llama-3.1-8b", "h200", 1, 467, 16): ((2, 18, 5), (4, 19, 6), (8, 20, 6), (16, 22, 7), (32, 27, 9)),
    ("llama-3.1-8b", "h200", 1, 202, 214): ((2, 17, 6), (4, 18, 6), (8, 19, 7), (16, 20, 8), (32, 24, 9)),
}  # fmt: skip
NEWER_GROUP_LEFT_OUT = BEYOND_GROUP  # the same engine's nearest source, left out for the held-out column
NEWER_REQUESTS = {(1000, 1000): 3000, (1024, 1024): 3000, (1024, 8192): 1500, (8192, 1024): 1500,
                  (32768, 1024): 1000, (1024, 32768): 1000}  # fmt: skip
NEWER = {
    (FP8, "llama-3.1-70b", "h200", 2): {(1000, 1000): 2587, (1024, 1024): 2582, (1024, 8192): 2009,
                                        (8192, 1024): 537, (32768, 1024): 120},
    (FP8, "llama-3.1-70b", "h100-sxm", 2): {(1000, 1000): 2209, (8192, 1024): 398},
    (FP4, "llama-3.1-70b", "b200", 1): {(1000, 1000): 6920, (1024, 1024): 6842, (1024, 8192): 3242,
                                        (8192, 1024): 1362, (32768, 1024): 274},
    (FP4, "llama-3.1-70b", "gb200", 1): {(1000, 1000): 7769, (1024, 1024): 7751, (1024, 8192): 3805,
                                         (8192, 1024): 1491, (32768, 1024): 302},
    (FP4, "qwen3-30b-a3b", "b200", 1): {(1000, 1000): 26971, (1024, 1024): 26611, (1024, 8192): 13497,
                                        (8192, 1024): 5735, (32768, 1024): 1265},
    (FP4, "qwen3-30b-a3b", "gb200", 1): {(1000, 1000): 22856, (1024, 1024): 22201, (1024, 8192): 14272,
                                         (8192, 1024): 6201, (32768, 1024): 1380},
    # its RTX 6000 Pro Blackwell Server Edition tables, one GPU (TP1,PP1): an accelerator no
    # corpus row ran on
    (FP4, "llama-3.1-70b", "rtx-pro-6000", 1): {(1000, 1000): 1724, (1024, 1024): 1708, (8192, 1024): 296},
    (FP4, "qwen3-30b-a3b", "rtx-pro-6000", 1): {(1000, 1000): 9938, (1024, 1024): 9755, (1024, 8192): 3621,
                                                (8192, 1024): 1914, (32768, 1024): 374},
}  # fmt: skip
# The same page's gpt-oss tables at one GPU a run (TP1): OpenAI's MXFP4 checkpoints, which the
# page runs with an fp8 KV cache on Blackwell and the checkpoint's bf16 on Hopper ("Hopper:
# use auto"), each in the maths TensorRT-LLM's profile picks for them there (MXFP8
# activations on Blackwell, BF16 on Hopper: engines.float4_native).
NEWER_MXFP4 = {
    ("gpt-oss-20b", "b200"): {(1000, 1000): 53812, (1024, 1024): 53491, (1024, 8192): 34702,
                              (1024, 32768): 14589, (8192, 1024): 11904, (32768, 1024): 2645},
    ("gpt-oss-20b", "gb200"): {(1000, 1000): 55823, (1024, 1024): 56528, (1024, 8192): 38100,
                               (1024, 32768): 16463, (8192, 1024): 12941, (32768, 1024): 2905},
    ("gpt-oss-20b", "h200"): {(1000, 1000): 13858, (1024, 1024): 13890, (1024, 8192): 12743,
                              (8192, 1024): 4015, (32768, 1024): 915},
    ("gpt-oss-20b", "h100-sxm"): {(1000, 1000): 11557, (1024, 1024): 11403, (1024, 8192): 8617,
                                  (8192, 1024): 3366, (32768, 1024): 785},
    ("gpt-oss-120b", "gb200"): {(1000, 1000): 27198, (1024, 1024): 26609, (1024, 8192): 14800,
                                (1024, 32768): 5556, (8192, 1024): 6835, (32768, 1024): 1645},
    ("gpt-oss-120b", "h200"): {(1000, 1000): 6868, (1024, 1024): 6798, (1024, 8192): 3543,
                               (8192, 1024): 1828, (32768, 1024): 519},
}  # fmt: skip
FAR = 0.40  # the bound on any one row's error


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rows", action="store_true", help="print every row")
    ap.add_argument("--markdown", action="store_true", help="the tables as Markdown (--rows too)")
    ap.add_argument("--checks", action="store_true", help="the sources kept as checks, never fitted")
    ap.add_argument("--beyond", action="store_true", help="the cells of a corpus table the corpus lacks")
    ap.add_argument("--newer", action="store_true", help="a newer TensorRT-LLM table, not in the corpus")
    ap.add_argument("--serving", action="store_true", help="TensorRT-LLM 0.14's serving table (open loop)")
    ap.add_argument("--dp-attention", action="store_true", help="DeepSeek-R1 runs with DP attention")
    ap.add_argument("--amd", action="store_true", help="the AMD page's releases and Oracle's batches")
    ap.add_argument("--small", action="store_true", help="Qwen2.5 0.5B to 3B on vLLM, batch 1")
    ap.add_argument("--itl", action="store_true", help="P99 ITL of the corpus's concurrency-4 runs")
    ap.add_argument("--apple", action="store_true", help="llama.cpp on an M2 Ultra, from other runs")
    ap.add_argument("--json", action="store_true", help="every row or cell and the summary, as strict JSON")
    args = ap.parse_args()
    # the reports of points outside the corpus: each its points, their summary and its printout
    for flag, (run, summarise, show) in POINT_REPORTS.items():
        if getattr(args, flag):
            points = run()
            if args.json:
                emit({"points": points, "summary": summarise(points)})
            else:
                show(points)
            return
    if args.beyond or args.newer:
        cells = beyond() if args.beyond else newer()
        if args.json:
            emit({"cells": cells, "summary": cells_summary(cells, by_block=args.beyond)})
        else:
            print_cells(cells, by_block=args.beyond)
        return
    t0 = time.perf_counter()
    checked = report.check(corpus.check_rows() if args.checks else None)
    took = time.perf_counter() - t0
    data = summary(checked, args.checks)
    if args.json:
        emit(data)
        return
    if args.rows and args.markdown:
        print("| id | source | engine | kind | model | gpu | tp | measured | predicted | error | held out |")
        print("|---|---|---|---|---|---|--:|--:|--:|--:|--:|")
        for r in data["rows"]:
            line = (r["id"], r["source"], r["engine"], r["kind"], r["model"], r["gpu"], str(r["tp"]),
                    f"{r['measured']:.4g} {r['unit']}", f"{r['predicted']:.4g}", f"{r['error']:+.1%}",
                    f"{r['held_out_error']:+.1%}")  # fmt: skip
            print("| " + " | ".join(line) + " |")
        print()
    elif args.rows:
        head = ("measured", "predicted", "error", "held out")
        print(f"{'id':4} {'engine':8} {'kind':13} " + " ".join(f"{h:>10}" for h in head))
        for r in data["rows"]:
            print(
                f"{r['id']:4} {r['engine']:8} {r['kind']:13} {r['measured']:10.4g} {r['predicted']:10.4g} "
                f"{r['error']:+10.1%} {r['held_out_error']:+10.1%}"
            )
    if args.markdown:
        print(
            "| rows | n | median \\|error\\| held out | worst held out | median in-sample | band coverage |"
        )
        print("|---|---|---|---|---|---|")
    for g in data["groups"]:
        cells = (g["name"], str(g["n"]), f"{g['held_out_median']:.1%}", f"{g['held_out_worst']:+.0%}",
                 f"{g['in_sample_median']:.1%}", f"{g['band_coverage']:.0%}")  # fmt: skip
        if args.markdown:
            print("| " + " | ".join(cells) + " |")
        else:
            print(f"{cells[0]:18} n={cells[1]:>3}  held out: median {cells[2]:>6}, worst {cells[3]:>6};"
                  f"  in-sample median {cells[4]:>6};  inside band {cells[5]}")  # fmt: skip
    if args.checks:
        seen = data["unseen_band_coverage"]
        inside, n = sum(s["inside"] for s in seen.values()), sum(s["rows"] for s in seen.values())
        each = ", ".join(f"{source} {s['inside']}/{s['rows']}" for source, s in seen.items())
        print(f"\nbands rebuilt without each check source hold {inside / n:.0%} of its rows ({each})")
        every = data["source_band_coverage"]
        inside, n = sum(s["inside"] for s in every.values()), sum(s["rows"] for s in every.values())
        print(f"bands rebuilt without each of the {len(every)} sources, corpus and checks, hold "
              f"{inside / n:.0%} of its rows (the band's aim: 80%)")  # fmt: skip
    print(f"\n{len(checked)} rows in {took:.1f} s; held-out predictions faster than measured: "
          f"{data['faster_than_measured']:.0%}; median signed held-out error "
          f"{data['signed_held_out_median']:+.1%}")  # fmt: skip
    for name, key in (("held out", "held_out"), ("in-sample", "in_sample")):
        far = data["far"][key]
        print(f"rows more than {FAR:.0%} off {name}: {len(far)}" + (f" ({', '.join(far)})" if far else ""))


def summary(checked: list[report.Checked], checks: bool) -> dict[str, Any]:
    """The report as data (`--json`): every row, the summary of each group of rows, the rows
    past FAR, and with the check sources the bands' coverage of each, rebuilt without it."""
    profiles = builtin_engines()
    groups = [("all", checked)]
    groups += [(f"regime {k}", v) for k, v in report.by(checked, "regime").items()]
    groups += [(f"engine {k}", v) for k, v in report.by(checked, "engine").items()]
    if checks:
        keys = (("group", "source"), ("gpu", "gpu"), ("model", "model"))
        groups += [(f"{label} {k}", v) for key, label in keys for k, v in report.by(checked, key).items()]
    data: dict[str, Any] = {
        "rows": [row_data(c, profiles) for c in checked],
        "groups": [group_data(name, cs, profiles) for name, cs in groups],
        "far_bound": FAR,
        "far": {
            "held_out": [c.row.id for c in checked if abs(c.held_out_error) > FAR],
            "in_sample": [c.row.id for c in checked if abs(c.error) > FAR],
        },
        "faster_than_measured": sum(corpus.optimistic(c.row, c.held_out) for c in checked) / len(checked),
        "signed_held_out_median": statistics.median(c.held_out_error for c in checked),
    }
    if checks:
        fitted = report.check()
        seen = report.unseen_coverage(fitted, checked)
        data["unseen_band_coverage"] = {source: {"inside": i, "rows": n} for source, (i, n) in seen.items()}
        every = report.unseen_coverage([], [*fitted, *checked])
        data["source_band_coverage"] = {source: {"inside": i, "rows": n} for source, (i, n) in every.items()}
    return data


def row_data(c: report.Checked, profiles: dict[str, EngineProfile]) -> dict[str, Any]:
    r = c.row
    return {
        "id": r.id,
        "source": r.group,
        "engine": r.engine,
        "kind": r.kind,
        "regime": r.regime,
        "model": r.model,
        "gpu": r.gpu,
        "tp": r.tp,
        "unit": r.unit,
        "measured": r.measured,
        **_predictions(c),
        "inside_band": report.inside(c, profiles),
    }


def group_data(name: str, cs: list[report.Checked], profiles: dict[str, EngineProfile]) -> dict[str, Any]:
    return {
        "name": name,
        "n": len(cs),
        "held_out_median": report.median_abs([c.held_out_error for c in cs]),
        "held_out_worst": max((c.held_out_error for c in cs), key=abs),
        "in_sample_median": report.median_abs([c.error for c in cs]),
        "band_coverage": report.covered(cs, profiles),
    }


def emit(data: dict[str, Any]) -> None:
    print(json.dumps(data, indent=2, allow_nan=False))


def beyond() -> list[dict[str, Any]]:
    """The TensorRT-LLM 1.0 table's cells the corpus does not hold, each checked."""
    cell = _cells(BEYOND_GROUP)
    held = {(r.model, r.gpu, r.tp, r.input, r.output) for r in corpus.rows() if r.group == BEYOND_GROUP}
    table: dict[tuple[str, str, str, int], tuple[int | None, ...]] = {**BEYOND, **BEYOND_MOE}
    return [
        cell(template, model, gpu, tp, i, o, BEYOND_REQUESTS[i, o], float(value))
        for (template, model, gpu, tp), measured in table.items()
        for (i, o), value in zip(BEYOND_LENGTHS, measured, strict=True)
        if value is not None and (model, gpu, tp, i, o) not in held  # else blank, or a corpus row already
    ]


def newer() -> list[dict[str, Any]]:
    """The current TensorRT-LLM table's cells, each checked."""
    from ridgeline.hardware import get_accelerator
    from ridgeline.models import get_model

    cell = _cells(NEWER_GROUP_LEFT_OUT)
    trtllm = builtin_engines()["trtllm"]
    cells = [
        cell(template, model, gpu, tp, i, o, NEWER_REQUESTS[i, o], float(per_gpu * tp))
        for (template, model, gpu, tp), table in NEWER.items()
        for (i, o), per_gpu in table.items()
    ]
    for (model, gpu), table in NEWER_MXFP4.items():
        hw = get_accelerator(gpu)
        mapping = {
            "weights": "mxfp4-experts",
            "maths": trtllm.default_maths(get_model(model), "file", hw),
            "kv": "fp8" if hw.has_peak("fp4") else "bf16",  # Blackwell's fp8 cache; Hopper's "auto"
        }
        cells += [cell(FP8, model, gpu, 1, i, o, NEWER_REQUESTS[i, o], float(v), **mapping)
                  for (i, o), v in table.items()]  # fmt: skip
    return cells


def serving() -> list[dict[str, Any]]:
    """TensorRT-LLM 0.14's serving table, each point's mean TTFT and mean inter-token latency
    simulated (Poisson arrivals at its rate, 500 requests) with the fitted profile and with
    the one fitted without the page's source."""
    from dataclasses import replace

    template = next(r for r in corpus.rows() if r.id == SERVING_TEMPLATE)
    fitted = builtin_engines()[template.engine]
    fold = report.fold_profile(fitted, report.folds()[template.engine][SERVING_GROUP])
    points = []
    for (model, gpu, tp, i, o), table in SERVING.items():
        for qps, ttft_ms, itl_ms in table:
            row = replace(template, id="point", kind="ttft_rate", model=model, gpu=gpu, tp=tp,
                          weights="bf16", maths="bf16", kv="bf16", input=i, output=o, rate=float(qps),
                          requests=500, http=True, measured=float(ttft_ms), unit="ms")  # fmt: skip
            point: dict[str, Any] = {"model": model, "gpu": gpu, "tp": tp, "input": i, "output": o,
                                     "qps": qps, "ttft_ms": ttft_ms, "itl_ms": itl_ms}  # fmt: skip
            for key, profile in (("", fitted), ("held_out_", fold)):
                d = corpus.deployment(row, profile)
                s = corpus.simulated(row, d)
                point[f"{key}predicted_engine_ms"] = s["ttft_mean"] * 1e3  # without the server's cost
                point[f"{key}predicted_ttft_ms"] = (s["ttft_mean"] + corpus.first_token_s(row, d)) * 1e3
                point[f"{key}predicted_itl_ms"] = s["itl_mean"] * 1e3  # over every token, as the table's
            for key, measured in (("engine", ttft_ms), ("ttft", ttft_ms), ("itl", itl_ms)):
                for pre in ("", "held_out_"):
                    point[f"{pre}{key}_error"] = point[f"{pre}predicted_{key}_ms"] / measured - 1
            points.append(point)
    return points


# The P99 ITL that GPUStack's pages print for the concurrency-4 runs whose median TTFT the
# corpus holds (the same logs: qwen3-8b/h100-latency.md @1dbc3b81, gpt-oss-120b/h100.md
# @1f37f1b8), in ms; no profile was fitted to a tail of ITL
ITL_P99 = {"F14": 11.48, "F15": 40.98, "F16": 24.38, "N07": 23.32}


def itl() -> list[dict[str, Any]]:
    """Each run's P99 ITL simulated with the fitted profile and with the one fitted without
    the run's source."""
    by_id = {r.id: r for r in (*corpus.rows(), *corpus.excluded_rows())}  # F15's workload too
    profiles = builtin_engines()
    points = []
    for rid, measured in ITL_P99.items():
        row = by_id[rid]
        fold = report.fold_profile(profiles[row.engine], report.folds()[row.engine][row.group])
        point: dict[str, Any] = {"row": rid, "engine": row.engine, "model": row.model, "gpu": row.gpu,
                                 "p99_itl_ms": measured}  # fmt: skip
        for key, profile in (("", profiles[row.engine]), ("held_out_", fold)):
            s = corpus.simulated(row, corpus.deployment(row, profile))
            point[f"{key}predicted_ms"] = s["itl_p99"] * 1e3
            point[f"{key}error"] = point[f"{key}predicted_ms"] / measured - 1
        points.append(point)
    return points


def itl_summary(points: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "n": len(points),
        "median": report.median_abs([p["error"] for p in points]),
        "held_out_median": report.median_abs([p["held_out_error"] for p in points]),
    }


def print_itl(points: list[dict[str, Any]]) -> None:
    print(f"{'row':4} {'engine':8} {'model':14} {'P99 ITL':>8} {'predicted':>9} {'error':>7} {'held out':>8}")
    for p in points:
        print(f"{p['row']:4} {p['engine']:8} {p['model']:14} {p['p99_itl_ms']:8.2f} {p['predicted_ms']:9.2f} "
              f"{p['error']:+7.1%} {p['held_out_error']:+8.1%}")  # fmt: skip
    s = itl_summary(points)
    print(f"\n{s['n']} runs: median |error| {s['median']:.1%}, held out {s['held_out_median']:.1%}")


def dp_attention() -> list[dict[str, Any]]:
    """GPUStack's DeepSeek-R1 page's SGLang runs with --enable-dp-attention (a check source:
    no profile was fitted to it) and TensorRT-LLM's DeepSeek-R1 max-throughput recipes (on no
    corpus row's page), each predicted with the fitted profile under --dp-attention and,
    beside it, at TP alone."""
    from dataclasses import replace

    by_id = {r.id: r for r in [*corpus.check_rows(), *corpus.rows()]}
    runs = [(replace(by_id[template], id="point", engine="sglang", input=i, output=o, requests=requests,
                     max_num_seqs=None, max_num_batched_tokens=None, measured=measured), template)
            for template, i, o, requests, measured in DP_ATTENTION_CHECKS]  # fmt: skip
    runs += [(replace(by_id["C01"], id="point", model="deepseek-v3", gpu=gpu, tp=8, ep=8, weights=w, maths=m,
                      kv=kv, input=1024, output=2048, requests=requests, max_num_seqs=seqs,
                      max_num_batched_tokens=tokens, measured=measured), "DSR1")
             for gpu, w, m, kv, seqs, tokens, requests, measured in DP_ATTENTION_TRTLLM]  # fmt: skip
    points = []
    for row, template in runs:
        profile = builtin_engines()[row.engine]
        dp = corpus.predict(replace(row, dp_attention=True), profile)
        tp = corpus.predict(row, profile)
        points.append({"template": template, "engine": row.engine, "gpu": row.gpu, "weights": row.weights,
                       "kv_dtype": row.kv, "input": row.input, "output": row.output,
                       "requests": row.requests, "lengths": row.lengths, "measured": row.measured,
                       "predicted": dp, "predicted_tp": tp, "error": corpus.error(row, dp),
                       "tp_error": corpus.error(row, tp)})  # fmt: skip
    return points


def dp_attention_summary(points: list[dict[str, Any]]) -> dict[str, Any]:
    """Median |error| and median signed error, priced with data-parallel attention and at TP:
    in all, and by engine."""
    out = _dp_medians(points)
    out["engines"] = {e: _dp_medians([p for p in points if p["engine"] == e])
                      for e in dict.fromkeys(p["engine"] for p in points)}  # fmt: skip
    return out


def _dp_medians(points: list[dict[str, Any]]) -> dict[str, Any]:
    return {"n": len(points),
            "median": report.median_abs([p["error"] for p in points]),
            "signed_median": statistics.median(p["error"] for p in points),
            "tp_median": report.median_abs([p["tp_error"] for p in points]),
            "tp_signed_median": statistics.median(p["tp_error"] for p in points)}  # fmt: skip


def print_dp_attention(points: list[dict[str, Any]]) -> None:
    print(f"{'engine':7} {'gpu':5} {'weights/kv':>13} {'in/out':>11} {'requests':>8} {'measured':>9} "
          f"{'predicted':>9} {'error':>7} {'at TP':>9} {'error':>7}")  # fmt: skip
    for p in points:
        lengths, dtypes = f"{p['input']}/{p['output']}", f"{p['weights']}/{p['kv_dtype']}"
        print(f"{p['engine']:7} {p['gpu']:5} {dtypes:>13} {lengths:>11} {p['requests']:8} "
              f"{p['measured']:9.0f} {p['predicted']:9.0f} {p['error']:+7.1%} {p['predicted_tp']:9.0f} "
              f"{p['tp_error']:+7.1%}")  # fmt: skip
    s = dp_attention_summary(points)
    print()
    for name, m in (("all", s), *s["engines"].items()):
        print(f"{name}: {m['n']} runs: median |error| {m['median']:.1%} with data-parallel attention "
              f"({m['signed_median']:+.1%} signed), {m['tp_median']:.1%} priced at TP "
              f"({m['tp_signed_median']:+.1%})")  # fmt: skip


def serving_summary(points: list[dict[str, Any]]) -> dict[str, Any]:
    """Median |error| and median signed error of each quantity, fitted and held out: in all,
    and below the table's capacity (2 to 16 queries a second)."""

    def medians(ps: list[dict[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {"n": len(ps)}
        for key in ("ttft", "engine", "itl"):
            for pre in ("", "held_out_"):
                errors = [p[f"{pre}{key}_error"] for p in ps]
                out[f"{pre}{key}_median"] = report.median_abs(errors)
                out[f"{pre}{key}_signed_median"] = statistics.median(errors)
        return out

    return {"all": medians(points), "below_32": medians([p for p in points if p["qps"] < 32])}


def print_serving(points: list[dict[str, Any]]) -> None:
    print(f"{'model':14} {'gpu':9} {'tp':>2} {'in/out':>8} {'qps':>3} {'TTFT ms':>8} {'predicted':>9} "
          f"{'error':>7} {'ITL ms':>7} {'predicted':>9} {'error':>7}")  # fmt: skip
    for p in points:
        lengths = f"{p['input']}/{p['output']}"
        print(f"{p['model']:14} {p['gpu']:9} {p['tp']:2} {lengths:>8} {p['qps']:3} {p['ttft_ms']:8.0f} "
              f"{p['predicted_ttft_ms']:9.1f} {p['ttft_error']:+7.1%} {p['itl_ms']:7.0f} "
              f"{p['predicted_itl_ms']:9.1f} {p['itl_error']:+7.1%}")  # fmt: skip
    s = serving_summary(points)
    for name, m in (("all", s["all"]), ("2 to 16 queries a second", s["below_32"])):
        print(f"\n{name}: {m['n']} points")
        labels = (("ttft", "mean TTFT"), ("engine", "mean TTFT, no server cost"), ("itl", "mean ITL"))
        for key, label in labels:
            fit, held = m[key + "_median"], m["held_out_" + key + "_median"]
            print(f"  {label}: median |error| {fit:.1%} fitted ({m[key + '_signed_median']:+.1%} signed), "
                  f"{held:.1%} held out ({m['held_out_' + key + '_signed_median']:+.1%})")  # fmt: skip


AMD_PAGE = "amd.com/<locale>/developer/resources/rocm-hub/dev-ai/performance-results.html"
# The page's vLLM throughput table on 8x MI300X (amd/Llama-3.1-70B- and -405B-Instruct-FP8-KV,
# TP 8, every prompt queued at once, max-num-seqs = prompts), in each 2025 release of the page,
# by its docker tag (each survives in one of the page's language editions): output tokens/s by
# (model, input, output).
AMD_LENGTHS = ((128, 2048), (128, 4096), (500, 2000), (2048, 2048))
AMD_PROMPTS = {("llama-3.1-70b", 128, 2048): 3200, ("llama-3.1-70b", 2048, 2048): 1500,
               ("llama-3.1-405b", 128, 2048): 1500, ("llama-3.1-405b", 2048, 2048): 500}  # fmt: skip
AMD_OTHER_PROMPTS = {(128, 4096): 1500, (500, 2000): 2000}
AMD_RELEASES = {  # docker tag: (the locale whose copy holds it, 70B's cells, 405B's cells)
    "rocm6.3.1_instinct_vllm0.8.3_20250410": ("zh-cn", (16364.9, 12171.0, 13290.4, 8216.5),
                                              (4331.6, 3409.9, 3184.0, 2154.3)),
    "rocm6.4.1_vllm_0.9.0.1_20250605": ("en", (16581.5, 13667.3, 13367.1, 8352.6),
                                        (4275, 3356.7, 3201.4, 2179.7)),
    "rocm6.4.1_vllm_0.9.1_20250715": ("en", (12638.9, 10756.8, 10691.7, 7354.9),
                                      (3912.8, 3084.7, 2935.9, 2191.5)),
    "rocm6.4.1_vllm_0.10.1_20250909": ("fr", (13818.7, 11612.0, 11408.7, 7800.5),
                                       (4134.0, 3177.6, 3034.1, 2214.2)),
    "rocm7.0.0_vllm_0.10.2_20251006": ("zh-cn", (13212.5, 11312.8, 11376.7, 7252.1),
                                       (4201.7, 3176.3, 2992.0, 2153.7)),
    "rocm7.0.0_vllm_0.11.1_20251103": ("ja", (13279.6, 11449.7, 11347.4, 7651.7),
                                       (3816.8, 3099.6, 3026.1, 2196.4)),
}  # fmt: skip
AMD_TEMPLATE, ORACLE_TEMPLATE = "C09", "H07"  # the corpus rows whose mapping each cell moves
# The Qwen2.5 speed benchmark's vLLM tables (QwenLM/Qwen2.5 docs/source/benchmark/
# speed_benchmark.rst @010c37c3: vLLM 0.6.3, one A100 80GB, batch 1, 2,048 tokens generated,
# "Speed(tokens/s)"), the cells of models and lengths no corpus row holds: (model, the
# checkpoint's quantisation) -> {input tokens: tokens/s}. Each moves the mapping of the corpus
# row of its quantisation (J01 BF16, J02 AWQ, J03 GPTQ-Int4, J04 GPTQ-Int8; the Instruct
# checkpoints, whose embeddings and lm_head stay bf16).
SMALL_GROUP = "Qwen2.5 speed benchmark"
SMALL_TEMPLATES = {"BF16": "J01", "AWQ": "J02", "GPTQ-Int4": "J03", "GPTQ-Int8": "J04"}
SMALL = {
    ("qwen2.5-0.5b", "BF16"): {1: 311.55, 6144: 304.79, 14336: 290.28, 30720: 264.51},
    ("qwen2.5-0.5b", "GPTQ-Int8"): {1: 257.07},
    ("qwen2.5-0.5b", "GPTQ-Int4"): {1: 260.93},
    ("qwen2.5-0.5b", "AWQ"): {1: 261.95},
    ("qwen2.5-1.5b", "BF16"): {1: 183.33, 6144: 176.68, 14336: 168.69, 30720: 152.04},
    ("qwen2.5-1.5b", "GPTQ-Int8"): {1: 201.67},
    ("qwen2.5-1.5b", "GPTQ-Int4"): {1: 217.03},
    ("qwen2.5-1.5b", "AWQ"): {1: 213.74},
    ("qwen2.5-3b", "BF16"): {1: 127.61, 6144: 123.15, 14336: 117.35, 30720: 105.88},
    ("qwen2.5-3b", "GPTQ-Int8"): {1: 150.02},
    ("qwen2.5-3b", "GPTQ-Int4"): {1: 168.20},
    ("qwen2.5-3b", "AWQ"): {1: 165.50},
    ("qwen2.5-7b", "BF16"): {6144: 80.70, 14336: 77.69},
}  # fmt: skip
# blogs.oracle.com/cloud-infrastructure/serving-llama-31-405b-model-with-amd-mi300x-gpus: vLLM's
# benchmark_latency.py, Llama 3.1 405B FP8 at TP 8 on BM.GPU.MI300X.8, 128 in and 128 out:
# average latency (s) by batch (1 and 64 are corpus rows H07 and H08).
ORACLE_LATENCY = {1: 3.530, 2: 3.583, 4: 3.734, 8: 3.974, 16: 4.375, 32: 5.130, 64: 6.919, 128: 10.340,
                  256: 17.750}  # fmt: skip


def amd() -> list[dict[str, Any]]:
    """The AMD ROCm page's throughput cells in every release and the Oracle blog's latency by
    batch that the corpus does not hold, each predicted by vLLM's fitted profile and by the one
    fitted without the cell's source: how the model carries across lengths, batches and
    releases on one AMD part."""
    from dataclasses import replace

    by_id = {r.id: r for r in corpus.rows()}
    fitted = builtin_engines()["vllm"]
    held_rows = {(r.group, r.model, r.input, r.output, r.batch, r.measured) for r in corpus.rows()}
    points = []

    def point(template: str, source: str, release: str, model: str, i: int, o: int, batch: int,
              requests: int, measured: float) -> None:  # fmt: skip
        base = by_id[template]
        if (base.group, model, i, o, batch, measured) in held_rows:
            return  # a corpus row already
        row = replace(base, id="cell", model=model, input=i, output=o, batch=batch, requests=requests,
                      max_num_seqs=requests or None, measured=measured)  # fmt: skip
        c = _checked(row, fitted, report.fold_profile(fitted, report.folds()["vllm"][base.group]))
        points.append({"source": source, "release": release, "model": model, "input": i, "output": o,
                       "batch": batch, "requests": requests, "unit": base.unit, "measured": measured,
                       **_predictions(c), "inside_band": report.inside(c)})  # fmt: skip

    for release, (locale, cells_70b, cells_405b) in AMD_RELEASES.items():
        for model, cells in (("llama-3.1-70b", cells_70b), ("llama-3.1-405b", cells_405b)):
            for (i, o), value in zip(AMD_LENGTHS, cells, strict=True):
                n = AMD_PROMPTS.get((model, i, o), AMD_OTHER_PROMPTS.get((i, o), 0))
                point(AMD_TEMPLATE, AMD_PAGE.replace("<locale>", locale), release, model, i, o, 1, n, value)
    oracle = by_id[ORACLE_TEMPLATE]
    for batch, seconds in ORACLE_LATENCY.items():
        point(ORACLE_TEMPLATE, "Oracle MI300X blog", "not stated", oracle.model, oracle.input, oracle.output,
              batch, 0, seconds)  # fmt: skip
    return points


def amd_summary(points: list[dict[str, Any]]) -> dict[str, Any]:
    """Median |error|, fitted and held out, and the median signed errors: in all, by release
    and for Oracle's batches; and the share of points whose held-out prediction's band holds
    them, as the corpus's coverage counts."""
    oracle = [p for p in points if p["source"] == "Oracle MI300X blog"]
    page = [p for p in points if p["source"] != "Oracle MI300X blog"]
    return _point_summary(points, releases=_by(page, "release"), oracle=_error_medians(oracle))


def print_amd(points: list[dict[str, Any]]) -> None:
    _print_points(
        points,
        [
            ("release", 38, "release"),
            ("model", 14, "model"),
            (">in/out", 9, lambda p: f"{p['input']}/{p['output']}"),
            (">batch", 5, "batch"),
        ],
    )
    s = amd_summary(points)
    groups = (*s["releases"].items(), ("Oracle's latency by batch", s["oracle"]), ("all", s["all"]))
    _print_groups(s["band_coverage"], groups, 38, "points")


def small() -> list[dict[str, Any]]:
    """The Qwen2.5 speed benchmark's vLLM cells of models and lengths the corpus does not
    hold, each predicted by vLLM's fitted profile and by the one fitted without that page."""
    from dataclasses import replace

    by_id = {r.id: r for r in corpus.rows()}
    fitted = builtin_engines()["vllm"]
    fold = report.fold_profile(fitted, report.folds()["vllm"][SMALL_GROUP])
    points = []
    for (model, quantisation), cells in SMALL.items():
        for i, measured in cells.items():
            template = by_id[SMALL_TEMPLATES[quantisation]]
            row = replace(template, id="cell", model=model, input=i, measured=measured)
            c = _checked(row, fitted, fold)
            points.append({"model": model, "quantization": quantisation, "weights": row.weights, "input": i,
                           "output": row.output, "measured": measured, **_predictions(c),
                           "inside_band": report.inside(c)})  # fmt: skip
    return points


def small_summary(points: list[dict[str, Any]]) -> dict[str, Any]:
    """Median |error|, fitted and held out, and the median signed errors: in all, by model and
    for the BF16 and the quantised checkpoints; and the share inside the held-out band."""
    return _point_summary(
        points,
        models=_by(points, "model"),
        bf16=_error_medians([p for p in points if p["quantization"] == "BF16"]),
        quantized=_error_medians([p for p in points if p["quantization"] != "BF16"]),
    )


def print_small(points: list[dict[str, Any]]) -> None:
    _print_points(
        points, [("model", 13, "model"), ("checkpoint", 10, "quantization"), (">input", 6, "input")]
    )
    s = small_summary(points)
    kinds = (("BF16", s["bf16"]), ("quantised", s["quantized"]), ("all", s["all"]))
    _print_groups(s["band_coverage"], (*s["models"].items(), *kinds), 13, "cells")


# llama.cpp's llama-bench on Apple silicon from other runs than the corpus's (its only Apple
# rows are the XiongjieDai source's, May 2024): Georgi Gerganov's M2 Ultra in two pull
# requests of ggml-org/llama.cpp. PR 3084 ("Metal: PP speedup", September 2023: "LLaMA 7B
# mostly F16/Q8_0/Q4_0", 12.55/6.67/3.56 GiB, `pp 512`, the column of the build it merged);
# PR 10238 ("metal : refactor kernel args into structs", November 2024, "llama 3B" F16 and
# Q4_0: Llama 3.2 3B, whose files the same author's PR 10171 of that month names, `pp512` and
# `tg128`, its master column: a refactor, 1-7% either way). (source, model, format, test,
# tokens/s)
APPLE_GPU = "m2-ultra"
APPLE_GROUP = "XiongjieDai GPU benchmarks"  # the corpus source of every Apple row
APPLE_TEMPLATES = {("F16", "pp"): "X60", ("F16", "tg"): "X59", ("quantised", "pp"): "X58",
                   ("quantised", "tg"): "X57"}  # fmt: skip
APPLE_WEIGHTS = {"F16": "fp16", "Q8_0": "gguf-8.50", "Q4_0": "gguf-4.50"}  # bits a weight, scales in
APPLE = [
    ("llama.cpp PR 3084", "llama-2-7b", "F16", "pp512", 1265.30),
    ("llama.cpp PR 3084", "llama-2-7b", "Q8_0", "pp512", 1142.84),
    ("llama.cpp PR 3084", "llama-2-7b", "Q4_0", "pp512", 1164.00),
    ("llama.cpp PR 10238", "llama-3.2-3b", "F16", "pp512", 3237.78),
    ("llama.cpp PR 10238", "llama-3.2-3b", "F16", "tg128", 72.29),
    ("llama.cpp PR 10238", "llama-3.2-3b", "Q4_0", "pp512", 2986.43),
    ("llama.cpp PR 10238", "llama-3.2-3b", "Q4_0", "tg128", 155.86),
]  # fmt: skip


def apple() -> list[dict[str, Any]]:
    """llama.cpp's Apple cells from other runs than the corpus's, each predicted by the fitted
    profile and by the one fitted without the corpus's only Apple source."""
    from dataclasses import replace

    by_id = {r.id: r for r in corpus.rows()}
    fitted = builtin_engines()["llamacpp"]
    fold = report.fold_profile(fitted, report.folds()["llamacpp"][APPLE_GROUP])
    points = []
    for source, model, fmt, test, measured in APPLE:
        kind, tokens = test[:2], int(test[2:])
        template = by_id[APPLE_TEMPLATES["F16" if fmt == "F16" else "quantised", kind]]
        assert template.gpu == APPLE_GPU and template.kind == kind
        row = replace(template, id="cell", model=model, weights=APPLE_WEIGHTS[fmt],
                      input=tokens if kind == "pp" else 0, output=tokens if kind == "tg" else 0,
                      measured=measured)  # fmt: skip
        c = _checked(row, fitted, fold)
        points.append({"source": source, "gpu": APPLE_GPU, "model": model, "format": fmt, "test": test,
                       "weights": row.weights, "measured": measured, **_predictions(c),
                       "inside_band": report.inside(c)})  # fmt: skip
    return points


def apple_summary(points: list[dict[str, Any]]) -> dict[str, Any]:
    """Median |error|, fitted and held out, and the median signed errors: in all, by source and
    by test (prefill, decode); and the share inside the held-out band."""
    return _point_summary(
        points,
        sources=_by(points, "source"),
        prefill=_error_medians([p for p in points if p["test"].startswith("pp")]),
        decode=_error_medians([p for p in points if p["test"].startswith("tg")]),
    )


def print_apple(points: list[dict[str, Any]]) -> None:
    _print_points(
        points,
        [("source", 19, "source"), ("model", 13, "model"), ("format", 6, "format"), ("test", 6, "test")],
    )
    s = apple_summary(points)
    tests = (("prefill", s["prefill"]), ("decode", s["decode"]), ("all", s["all"]))
    _print_groups(s["band_coverage"], (*s["sources"].items(), *tests), 19, "cells")


def _by(points: list[dict[str, Any]], field: str) -> dict[Any, dict[str, Any]]:
    """The points' medians (`_error_medians`) for each value of `field`, in their order."""
    values = dict.fromkeys(p[field] for p in points)
    return {v: _error_medians([p for p in points if p[field] == v]) for v in values}


def _point_summary(points: list[dict[str, Any]], **groups: Any) -> dict[str, Any]:
    """A point report's summary: the medians of all its points, the share of them inside the
    band around the held-out prediction, and the report's own groups."""
    return {"all": _error_medians(points),
            "band_coverage": sum(p["inside_band"] for p in points) / len(points), **groups}  # fmt: skip


Column = tuple[str, int, str | Callable[[dict[str, Any]], Any]]  # header (">": right), width, key


def _print_points(points: list[dict[str, Any]], columns: list[Column]) -> None:
    """A point report's table: its own leading columns, then measured, predicted and the
    signed errors, fitted and held out."""

    def cell(text: Any, header: str, width: int) -> str:
        return f"{text:>{width}}" if header.startswith(">") else f"{text:{width}}"

    lead = " ".join(cell(h.lstrip(">"), h, w) for h, w, _ in columns)
    print(f"{lead} {'measured':>9} {'predicted':>9} {'error':>7} {'held out':>8}")
    for p in points:
        values = (key(p) if callable(key) else p[key] for _, _, key in columns)
        lead = " ".join(cell(v, h, w) for v, (h, w, _) in zip(values, columns, strict=True))
        errors = f"{p['error']:+7.1%} {p['held_out_error']:+8.1%}"
        print(f"{lead} {p['measured']:9.4g} {p['predicted']:9.4g} {errors}")


def _print_groups(coverage: float, groups: Any, width: int, what: str) -> None:
    """A point report's footer: the share inside the held-out band, then each group's
    medians, fitted and held out, and its median signed errors."""
    print()
    print(f"inside the band around the held-out prediction: {coverage:.0%} of the {what}")
    for name, m in groups:
        print(
            f"{name:{width}} {m['n']:2} {what}: "
            + _medians(m, "fitted")
            + f"; median signed {m['signed_median']:+.1%}, {m['signed_held_out_median']:+.1%}"
        )


def _error_medians(ps: list[dict[str, Any]]) -> dict[str, Any]:
    """Points' median |error|, fitted and held out, and their median signed errors."""
    return {"n": len(ps), "median": report.median_abs([p["error"] for p in ps]),
            "held_out_median": report.median_abs([p["held_out_error"] for p in ps]),
            "signed_median": statistics.median(p["error"] for p in ps),
            "signed_held_out_median": statistics.median(p["held_out_error"] for p in ps)}  # fmt: skip


def _blocks(cells: list[dict[str, Any]]) -> dict[tuple[str, str, int], list[dict[str, Any]]]:
    """The cells by block of the table: model, accelerator and TP."""
    blocks: dict[tuple[str, str, int], list[dict[str, Any]]] = {}
    for c in cells:
        blocks.setdefault((c["model"], c["gpu"], c["tp"]), []).append(c)
    return blocks


def cells_summary(cells: list[dict[str, Any]], by_block: bool) -> dict[str, Any]:
    """The cells' median |error|, fitted and held out: in all, and for the 1.0 table by block
    and by precision, with the median signed errors."""
    out: dict[str, Any] = {"all": _error_medians(cells)}
    if by_block:
        blocks = _blocks(cells).items()
        out["blocks"] = [{"model": m, "gpu": g, "tp": tp, **_error_medians(cs)} for (m, g, tp), cs in blocks]
        apart = [c for c in cells if (c["model"], c["tp"]) in MOE_BLOCKS]
        earlier = [
            c for c in cells if (c["model"], c["tp"]) not in MOE_BLOCKS
        ]  # the Llama 3 and Qwen3-30B blocks
        for key, group in (("precisions", earlier), ("moe", apart)):
            out[key] = {p: _error_medians([c for c in group if c["precision"] == p]) for p in ("fp8", "fp4")}
    return out


def print_cells(cells: list[dict[str, Any]], by_block: bool) -> None:
    print(f"{'model':14} {'gpu':12} {'tp':>2} {'in/out':>11} {'measured':>9} {'predicted':>9} "
          f"{'error':>7} {'held out':>8}")  # fmt: skip
    for c in cells:
        lengths = f"{c['input']}/{c['output']}"
        print(f"{c['model']:14} {c['gpu']:12} {c['tp']:2} {lengths:>11} {c['measured']:9.0f} "
              f"{c['predicted']:9.0f} {c['error']:+7.1%} {c['held_out_error']:+8.1%}")  # fmt: skip
    s = cells_summary(cells, by_block)
    if not by_block:
        print(f"\n{len(cells)} cells: " + _medians(s["all"], "with the fitted profile"))
        return
    print()
    for b in s["blocks"]:
        print(f"{b['model']:14} {b['gpu']:12} {b['tp']:2} {b['n']:2} cells: " + _medians(b, "fitted"))
    print()
    for name, group in (("", s["precisions"]), ("Llama 4 and Qwen3-235B, ", s["moe"])):
        for p, m in group.items():
            signed = f"; median signed {m['signed_median']:+.1%}, {m['signed_held_out_median']:+.1%}"
            print(f"{name}{p.upper()}: {m['n']} cells: " + _medians(m, "with the fitted profile") + signed)


def _cells(left_out: str) -> Callable[..., dict[str, Any]]:
    """A cell's check: a corpus row of the template's mapping moved to the cell (model,
    accelerator, TP, lengths, requests, its measured value), predicted by the fitted profile
    and by the one fitted without the source `left_out`."""
    from dataclasses import replace

    by_id = {r.id: r for r in corpus.rows()}
    fitted = builtin_engines()[by_id[FP8].engine]
    fold = report.fold_profile(fitted, report.folds()[by_id[FP8].engine][left_out])

    def cell(template: str, model: str, gpu: str, tp: int, i: int, o: int, requests: int,
             measured: float, **mapping: str) -> dict[str, Any]:  # fmt: skip
        dp = tp > 1 and (model, tp) in MOE_BLOCKS  # the page runs its MoE models so
        row = replace(by_id[template], id="cell", model=model, gpu=gpu, tp=tp, input=i, output=o,
                      requests=requests, measured=measured, dp_attention=dp, **mapping)  # fmt: skip
        return {
            "precision": "mxfp4" if mapping else "fp8" if template == FP8 else "fp4",
            "model": model,
            "gpu": gpu,
            "tp": tp,
            "input": i,
            "output": o,
            "requests": requests,
            "measured": measured,
            **_predictions(_checked(row, fitted, fold)),
        }

    return cell


def _checked(row: corpus.Row, fitted: EngineProfile, fold: EngineProfile) -> report.Checked:
    """A row moved off the corpus, predicted by the fitted profile and by a fold's."""
    return report.Checked(row, corpus.predict(row, fitted), corpus.predict(row, fold))


def _predictions(c: report.Checked) -> dict[str, float]:
    """A checked row's predictions and signed errors, as the reports' JSON names them."""
    return {"predicted": c.predicted, "held_out": c.held_out,
            "error": c.error, "held_out_error": c.held_out_error}  # fmt: skip


def _medians(m: dict[str, Any], fitted: str) -> str:
    """A summary's median |error|, fitted and held out."""
    return f"median |error| {m['median']:.1%} {fitted}, {m['held_out_median']:.1%} held out"


POINT_REPORTS: dict[
    str, tuple[Callable[[], list[dict[str, Any]]], Callable[..., dict[str, Any]], Callable[..., None]]
] = {
    "serving": (serving, serving_summary, print_serving),
    "dp_attention": (dp_attention, dp_attention_summary, print_dp_attention),
    "amd": (amd, amd_summary, print_amd),
    "small": (small, small_summary, print_small),
    "apple": (apple, apple_summary, print_apple),
    "itl": (itl, itl_summary, print_itl),
}

if __name__ == "__main__":
    main()
