"""The progress bar: in place on a terminal, a few plain lines elsewhere, notes above the bar."""

from __future__ import annotations

import io

from coopnn.progress import LOG_STEPS, Progress


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_log_stream_gets_one_line_per_tenth():
    stream = io.StringIO()
    with Progress(200, "train", stream=stream) as bar:
        for i in range(200):
            bar.advance(detail=f"step {i}")
    lines = stream.getvalue().splitlines()
    assert len(lines) == LOG_STEPS
    assert lines[0].startswith("train [") and "20/200" in lines[0] and "step 19" in lines[0]
    assert "200/200 100%" in lines[-1] and "\r" not in stream.getvalue()


def test_terminal_redraws_in_place_and_ends_with_a_newline():
    stream = Terminal()
    with Progress(3, "bench", stream=stream, min_interval=0) as bar:
        for _ in range(3):
            bar.advance()
    text = stream.getvalue()
    assert text.count("\r") >= 3 and text.endswith("\n") and text.count("\n") == 1
    assert "3/3 100%" in text.split("\r")[-1]


def test_terminal_redraws_are_rate_limited_but_the_last_step_is_drawn():
    stream = Terminal()
    with Progress(1000, stream=stream, min_interval=3600) as bar:
        for _ in range(1000):
            bar.advance()
    draws = stream.getvalue().split("\r")[1:]
    assert len(draws) <= 3 and "1000/1000" in draws[-1]


def test_note_goes_above_the_bar():
    stream = Terminal()
    with Progress(2, stream=stream, min_interval=0) as bar:
        bar.advance()
        bar.note("model x failed")
        bar.advance()
    lines = stream.getvalue().split("\n")
    assert lines[0].endswith("model x failed") and "2/2" in lines[1]


def test_bar_line_has_count_percentage_and_eta():
    bar = Progress(4, "x", stream=io.StringIO(), width=8)
    bar.advance(2, "half")
    line = bar.line()
    assert "[####----] 2/4  50%" in line and "eta" in line and line.endswith("half")


def test_empty_progress_is_complete():
    stream = io.StringIO()
    with Progress(0, stream=stream) as bar:
        assert "100%" in bar.line()
