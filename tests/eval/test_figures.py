"""The lab's figures as a reader sees them: every "n=" label readable, crossed by no error bar
and covered by no point, and every legend outside the axes (it hides nothing)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from callgate.eval.analysis import Prereg, analyse
from callgate.eval.funnel import funnel
from callgate.eval.record import CallView, RunView
from callgate.eval.report import write_report
from callgate.eval.tokens import RegexTokenizer


@pytest.fixture(autouse=True)
def _matplotlib() -> None:
    """The figures need matplotlib (the ``eval`` extra): skipped without it. Imported when a
    test runs, not when the suite is collected."""
    pytest.importorskip("matplotlib")


PREREG = Prereg.from_mapping(
    {
        "surfaces": ["coarse", "fine"],
        "analysis": {"bootstrap_reps": 500, "seed": 1, "min_effect": 0.2},
        "hypotheses": {
            "H1": {"better": "coarse", "than": "fine"},
            "H2": {"highest": "coarse"},
            "H3": {"best": "fine"},
            "H4": {"cheapest_single": "fine"},
        },
    }
)
DEFS = {
    "coarse": [{"name": "do", "description": "one operation"}],
    "fine": [{"name": n, "description": "a typed tool " * 4} for n in ("read_file", "write_file")],
}


def _small_lab() -> list[RunView]:
    """Five tasks on two surfaces (ten runs), the shape that crowded the figures: coarse fails
    every single task (a rate of 0 with a wide interval), arguments repeat (η near its
    floor), one failed call per coarse run."""
    runs = []
    for i in range(5):
        complexity = "single" if i < 3 else "composition"
        for surface in ("coarse", "fine"):
            tool = "do" if surface == "coarse" else "read_file"
            args = {"path": "a.py"} if surface == "fine" else {"op": "read", "args": {"p": i % 2}}
            calls = [CallView(call_id="1", tool=tool, arguments=json.dumps(args), status="ok")]
            if surface == "coarse":
                calls.append(CallView(call_id="2", tool=tool, arguments="{", status="rejected",
                                      stage="parse"))  # fmt: skip
            passed = surface == "fine" or complexity == "composition"
            runs.append(
                RunView(run_id=f"{i}/{surface}", task=f"t{i}", surface=surface, kind="k",
                        complexity=complexity, tool_definitions=DEFS[surface],
                        tools=tuple(d["name"] for d in DEFS[surface]), calls=calls,
                        model_turns=len(calls) + 1, result_texts=["text"], passed=passed)
            )  # fmt: skip
    return runs


def _overlaps(a: Any, b: Any, pad: float = 0.0) -> bool:
    """Two display-space boxes (x0, y0, x1, y1) intersect (``b`` grown by ``pad`` pixels)."""
    return not (a[2] < b[0] - pad or b[2] + pad < a[0] or a[3] < b[1] - pad or b[3] + pad < a[1])


def _collisions(fig: Any) -> list[str]:
    """Each "n=" label that an error bar crosses or a drawn point covers, and each legend that
    lies over the axes, described for the failure message."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.collections import LineCollection, PathCollection

    FigureCanvasAgg(fig).draw()  # closed after saving: a fresh canvas lays it out again
    renderer = fig.canvas.get_renderer()
    found = []
    for ax in fig.axes:
        box = ax.get_window_extent(renderer)
        legend = ax.get_legend()
        if legend is not None and _overlaps(
            legend.get_window_extent(renderer).extents, box.extents, pad=-1
        ):
            found.append(f"{ax.get_title()!r}: the legend lies over the axes")
        shapes: list[tuple[str, Any]] = []
        for c in ax.collections:
            if isinstance(c, LineCollection):  # error bars
                for seg in c.get_segments():
                    pts = c.get_transform().transform(np.asarray(seg))
                    shapes.append(("error bar", (*pts.min(axis=0), *pts.max(axis=0))))
            elif isinstance(c, PathCollection):  # scattered points
                for pt in c.get_offset_transform().transform(c.get_offsets()):
                    shapes.append(("point", (pt[0] - 3, pt[1] - 3, pt[0] + 3, pt[1] + 3)))
        for line in ax.lines:  # error bar caps and markers
            for pt in line.get_transform().transform(line.get_xydata()):
                shapes.append(("cap", (pt[0] - 2, pt[1] - 1, pt[0] + 2, pt[1] + 1)))
        for text in ax.texts:
            if not text.get_text().startswith("n="):
                continue
            tb = text.get_window_extent(renderer).extents
            for what, shape in shapes:
                if _overlaps(tb, shape):
                    found.append(f"{ax.get_title()!r}: {text.get_text()} is crossed by a {what}")
                    break
    return found


def test_no_n_label_is_crossed_and_no_legend_hides_anything(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ten runs through write_report: in each of the four figures every "n=" label is clear of
    error bars, caps and points, and every legend is outside its axes."""
    from matplotlib.figure import Figure

    drawn: dict[str, Any] = {}
    save = Figure.savefig

    def keep(self: Figure, fname: Any, *args: Any, **kwargs: Any) -> None:
        drawn[Path(str(fname)).name] = self
        save(self, fname, *args, **kwargs)

    monkeypatch.setattr(Figure, "savefig", keep)
    runs = _small_lab()
    a = analyse(runs, PREREG, RegexTokenizer())
    write_report(a, funnel(runs, reps=200), tmp_path)
    assert sorted(drawn) == ["eta.png", "funnel.png", "success.png", "tokens.png"]
    problems = [p for fig in drawn.values() for p in _collisions(fig)]
    assert problems == [], "\n".join(problems)
    for name, fig in drawn.items():
        labels = [t for ax in fig.axes for t in ax.texts if t.get_text().startswith("n=")]
        ticks = [t.get_text() for ax in fig.axes for t in ax.get_xticklabels()]
        assert labels or any("n=" in t for t in ticks), f"{name} names no n"
