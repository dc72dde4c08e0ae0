"""`ridgeline web`: the lesson "Prefill, decode and the cost of a token" in the browser.

A FastAPI app (`app.py`) serves static assets (`static/`) and a JSON API whose numbers all
come from the core; the lesson's steps are Markdown files with TOML front matter
(`lesson/`), loaded and filled in by `lesson.py`. The page only draws.
"""
