"""The learner's walk, again: all 18 steps at 1400, 768 and 390 px in Chromium, moved with
the keyboard, against `ridgeline web`. Each step is held to the list a learner found
(issue 13), and its screenshot is kept under test-artifacts/walk/ to be looked at:

- every formula fits its column (never clipped, never a scrollbar);
- nothing scrolls but the lesson column, which is meant to on a wide screen; the page never
  scrolls sideways, and the command line is never cut;
- the outline is reachable from every step, and lists the seven sections and every takeaway;
- every label of the chart lies inside it, at a size a phone can read;
- the stage's title follows the batch, and the memory bar says what the text says;
- no focus ring sits on the title after a key press; the drill's feedback is plain text with
  a small coloured mark, not bold red or green; the cheat sheet has room.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, Page, expect

from ridgeline.web import lesson
from test_web_api import LESSON_TITLES, SECTIONS
from test_web_e2e import ARTIFACTS, base_url  # noqa: F401  (a fixture)

WIDTHS = {1400: 900, 768: 1024, 390: 844}
INK = "rgb(31, 35, 40)"

# Everything a learner saw go wrong on one step, as a list of problems (empty when none).
PROBLEMS = """() => {
  const problems = [];
  const visible = (el) => el.getClientRects().length > 0;
  for (const m of document.querySelectorAll("#step-body math[display='block']")) {
    if (m.scrollWidth > m.clientWidth + 1) {
      const what = m.textContent.trim().slice(0, 40);
      problems.push(`formula "${what}" needs ${m.scrollWidth} px of ${m.clientWidth}`);
    }
  }
  for (const el of document.querySelectorAll("body *")) {
    if (!visible(el)) continue;
    const s = getComputedStyle(el);
    const sideways = ["auto", "scroll"].includes(s.overflowX) && el.scrollWidth > el.clientWidth + 1;
    const down = ["auto", "scroll"].includes(s.overflowY) && el.scrollHeight > el.clientHeight + 1 &&
      !el.matches(".step, .outline");
    const name = `<${el.tagName.toLowerCase()} id="${el.id}" class="${el.className}">`;
    if (sideways || down) problems.push(`a scrollbar on ${name}`);
  }
  if (document.documentElement.scrollWidth > window.innerWidth) problems.push("the page scrolls sideways");
  for (const pre of document.querySelectorAll("#step-body pre")) {
    if (pre.scrollWidth > pre.clientWidth + 1) problems.push("the command line is cut");
  }
  const svg = document.getElementById("roofline");
  const box = svg.viewBox.baseVal;
  const scale = svg.clientWidth / box.width;
  const edge = svg.getBoundingClientRect();
  for (const t of svg.querySelectorAll("text")) {
    const b = t.getBoundingClientRect(); // after any rotation
    if (b.left < edge.left - 0.5 || b.right > edge.right + 0.5 || b.top < edge.top - 0.5 ||
        b.bottom > edge.bottom + 0.5) {
      problems.push(`the chart cuts "${t.textContent}"`);
    }
    const px = parseFloat(getComputedStyle(t).fontSize) * scale;
    if (px < 10.9) problems.push(`chart text at ${px.toFixed(1)} px: "${t.textContent}"`);
  }
  const batch = Number(document.getElementById("batch").value);
  const stage = document.getElementById("stage-title").textContent;
  if ((batch > 1) !== stage.includes(`${batch.toLocaleString("en-US")} requests`)) {
    problems.push(`the stage is titled "${stage}" at batch ${batch}`);
  }
  const verdict = document.getElementById("memory-verdict").textContent;
  const said = document.getElementById("step-body").textContent.replace(/\\s+/g, " ");
  if (verdict === "does not fit" && !said.includes("does not fit")) {
    problems.push(`the memory bar says "${verdict}" and the step does not`);
  }
  const toggle = document.getElementById("outline-toggle");
  if (!visible(toggle) || toggle.disabled) problems.push("no way to the outline");
  const title = document.getElementById("step-title");
  if (document.activeElement === title && getComputedStyle(title).outlineStyle !== "none") {
    problems.push("a focus ring on the title");
  }
  return problems;
}"""


@pytest.fixture(params=list(WIDTHS), ids=[f"{w}px" for w in WIDTHS])
def walker(request: pytest.FixtureRequest, browser: Browser, base_url: str) -> Iterator[tuple[Page, int]]:  # noqa: F811
    width = request.param
    context = browser.new_context(
        viewport={"width": width, "height": WIDTHS[width]}, base_url=base_url, reduced_motion="reduce"
    )
    page = context.new_page()
    errors: list[str] = []
    page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    yield page, width
    context.close()
    assert errors == []


def settle(page: Page, n: int, renders_before: str | None) -> None:
    expect(page.locator("body")).to_have_attribute("data-step", str(n))
    if renders_before is not None:
        expect(page.locator("body")).not_to_have_attribute("data-renders", renders_before)
    if n == 15:
        expect(page.locator("#slo")).to_have_attribute("data-state", "live", timeout=30_000)
    page.wait_for_timeout(150)  # the chart and the formulas are redrawn at once; let them paint


def test_walk_all_eighteen_steps(walker: tuple[Page, int]) -> None:
    page, width = walker
    shots = ARTIFACTS / "walk" / f"{width}px"
    shots.mkdir(parents=True, exist_ok=True)
    page.goto("/#step-1")
    expect(page.locator("body")).to_have_attribute("data-ready", "true")
    expect(page.locator("body[data-renders]")).to_be_attached()
    settle(page, 1, None)
    found: dict[int, list[str]] = {}
    for n in range(1, 19):
        if n > 1:
            before = page.locator("body").get_attribute("data-renders")
            page.keyboard.press("n" if n % 2 else "ArrowRight")
            settle(page, n, before)
        expect(page.locator("#step-title")).to_have_text(LESSON_TITLES[n - 1])
        problems = page.evaluate(PROBLEMS)
        if problems:
            found[n] = problems
        page.screenshot(path=str(shots / f"step-{n:02d}.png"), full_page=True)
    assert found == {}


def test_the_outline_is_reachable_from_every_step(walker: tuple[Page, int]) -> None:
    page, width = walker
    page.goto("/#step-9")
    expect(page.locator("body[data-renders]")).to_be_attached()
    outline = page.locator("#outline")
    page.keyboard.press("o")
    expect(outline).to_be_visible()
    expect(page.locator("#outline-list > li > h3")).to_have_text(SECTIONS)
    expect(page.locator("#outline-list .takeaway-line")).to_have_count(18)
    expect(page.locator("#outline-list a[aria-current='step'] .title")).to_have_text(LESSON_TITLES[8])
    page.screenshot(path=str(ARTIFACTS / "walk" / f"{width}px" / "outline.png"), full_page=True)
    page.keyboard.press("Escape")
    expect(outline).to_be_hidden()
    expect(page.locator("#step-title")).to_have_text(LESSON_TITLES[8])
    for n in (1, 18):  # the button, at either end of the lesson
        page.goto(f"/#step-{n}")
        expect(page.locator("body")).to_have_attribute("data-step", str(n))
        page.locator("#outline-toggle").click()
        expect(outline).to_be_visible()
        page.locator("#outline-list a", has_text=LESSON_TITLES[3]).click()
        expect(outline).to_be_hidden()
        expect(page.locator("#step-title")).to_have_text(LESSON_TITLES[3])


def test_drill_feedback_is_readable(walker: tuple[Page, int]) -> None:
    page, width = walker
    page.goto("/#step-13")
    expect(page.locator("body")).to_have_attribute("data-step", "13")
    page.locator("#drill-answer").fill("35.3")
    page.get_by_role("button", name="Check").click()
    verdict = page.locator("#drill-verdict")
    expect(verdict).to_contain_text("Not quite")
    for node in (verdict, page.locator("#drill-working p").first):
        style = node.evaluate("(el) => [getComputedStyle(el).fontWeight, getComputedStyle(el).color]")
        assert int(style[0]) <= 500 and style[1] == INK, style
    expect(page.locator("#drill-verdict .badge.wrong")).to_have_text("Not quite")
    shot = ARTIFACTS / "walk" / f"{width}px" / "drill-feedback.png"
    page.locator("#drill-feedback").screenshot(path=str(shot))


def test_the_cheat_sheet_has_room(walker: tuple[Page, int]) -> None:
    page, width = walker
    page.goto("/#step-17")
    expect(page.locator("body")).to_have_attribute("data-step", "17")
    table = page.locator("#step-body table")
    shape = table.evaluate("(t) => [t.clientWidth, getComputedStyle(t).display]")
    if width >= 768:
        assert shape[1] == "table" and shape[0] >= 600, shape  # not a 330 px column
    else:
        assert shape[1] == "block", shape  # a phone: one card an idea


def test_the_stage_shows_attention_and_the_batch(walker: tuple[Page, int]) -> None:
    page, _ = walker
    page.goto("/#step-14")
    expect(page.locator("body")).to_have_attribute("data-step", "14")
    share = f"{lesson.values(lesson.get_step(14).state)['prefill']['attention_share']:.0%}"
    expect(page.locator("#prefill-attention")).to_have_text(share)
    stage = page.locator("#stage")
    expect(stage).to_have_attribute("aria-label", re.compile(f"attention {share} of its FLOPs"))
    page.goto("/#step-6")
    expect(page.locator("#stage-title")).to_have_text("The stage: 64 requests, decoding together")
    expect(page.locator("#stage-note")).to_contain_text("200 tokens of context")
    expect(page.locator("#ttft-note")).to_have_text("all 64 prompts in one pass")
    page.goto("/#step-15")  # the step with the simulator points at its table, not at itself
    expect(page.locator("#stage-note")).to_contain_text("the simulator's table above")
    expect(page.locator("#stage-note")).not_to_contain_text("(step 15)")


def test_step_eight_switches_the_maths_to_fp8_and_prefill_moves(walker: tuple[Page, int]) -> None:
    """Step 8: "Switch Maths to fp8 in the playground: TTFT falls ... the roof rises to the
    fp8 peak": the H100's 1,979 TFLOP/s of dense fp8 over 3.35 TB/s is a ridge of 591."""
    page, width = walker
    page.goto("/#step-8")
    expect(page.locator("body")).to_have_attribute("data-step", "8")
    expect(page.locator("#ttft")).to_have_text("55.9 ms")
    before = page.locator("body").get_attribute("data-renders")
    page.locator("#maths-pills label", has_text="fp8").click()
    expect(page.locator("body")).not_to_have_attribute("data-renders", before or "")
    expect(page.locator("#ridge")).to_have_text(f"{1979e12 / 3.35e12:.0f}")
    ttft = float(page.locator("#ttft").get_attribute("data-value") or "nan")
    assert ttft < 0.6 * 0.0559  # prefill moved: it is compute-bound, and the maths is twice as fast
    assert page.evaluate(PROBLEMS) == []
    page.screenshot(path=str(ARTIFACTS / "walk" / f"{width}px" / "step-08-fp8-maths.png"), full_page=True)
