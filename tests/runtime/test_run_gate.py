"""`RunGate`: runs overlap, an exclusive change waits for them and holds new ones back, closing refuses later runs."""

from __future__ import annotations

import threading
import time

import pytest

from coopnn.errors import InputError
from coopnn.runtime.run_gate import RunGate


def test_runs_overlap():
    gate, inside, both = RunGate("model 'm'"), [], threading.Barrier(2, timeout=5)

    def run():
        with gate.shared():
            both.wait()  # only passes when both runs are inside at once
            inside.append(1)

    threads = [threading.Thread(target=run) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert inside == [1, 1]


def test_exclusive_waits_for_runs_and_holds_new_ones_back():
    gate, events = RunGate("model 'm'"), []
    running = threading.Event()

    def long_run():
        with gate.shared():
            running.set()
            time.sleep(0.1)
            events.append("run done")

    def change():
        with gate.exclusive():
            events.append("change")
            time.sleep(0.05)
            events.append("change done")

    first = threading.Thread(target=long_run)
    first.start()
    running.wait()
    changer = threading.Thread(target=change)
    changer.start()
    time.sleep(0.02)
    def late_run():
        with gate.shared():
            events.append("late run")

    late = threading.Thread(target=late_run)
    late.start()
    for t in (first, changer, late):
        t.join()
    assert events == ["run done", "change", "change done", "late run"]


def test_close_refuses_later_runs_and_is_idempotent():
    gate = RunGate("model 'm'")
    assert gate.close() is True and gate.close() is False and gate.closed
    with pytest.raises(InputError, match="model 'm' is closed"):
        with gate.shared():
            pass
