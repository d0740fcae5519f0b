"""Write a results table in the runner's format (CSV + Markdown) from computed cells.

Used for tables whose workloads (explicit matrices) or derived metrics (lower bound /
error) the YAML runner cannot express yet; numbers still come from mmtoolkit.evaluate.
"""

from pathlib import Path

from mmtoolkit.atomic import write_atomic
from mmtoolkit.privacy import from_spec
from mmtoolkit.runner.config import Column, Config, Metric, Row, Tolerance
from mmtoolkit.runner.run import Cell, compare_with_paper, render_csv, render_markdown

RESULTS = Path(__file__).resolve().parents[2] / "results" / "eigen_design"


class _Metric(Metric):
    def __init__(self, text):
        super().__init__("rmse")
        self.text = text

    def describe(self):
        return self.text


def write_table(table, title, source, metric_text, privacy_spec, tol, columns, rows, notes=""):
    """``rows``: list of (row name, {column: ours}, {column: paper}, {column: note})."""
    cfg = Config(
        path=Path(f"experiments/eigen_design/{table}.py"),
        paper="eigen_design",
        table=table,
        title=title,
        source=source,
        metric=_Metric(metric_text),
        privacy_spec=privacy_spec,
        privacy=from_spec(privacy_spec),
        columns=[Column(name=c) for c in columns],
        rows=[Row(name=r[0], workload=None) for r in rows],
        tolerance=Tolerance(**tol),
        notes=notes,
    )
    cells = []
    for name, ours, paper, cell_notes in rows:
        for col in columns:
            cell = Cell(row=name, column=col, ours=ours.get(col), paper=paper.get(col))
            cell.note = cell_notes.get(col, "")
            compare_with_paper(cell, cfg)
            cells.append(cell)
    write_atomic(RESULTS / f"{table}.csv", render_csv(cells))
    write_atomic(RESULTS / f"{table}.md", render_markdown(cfg, cells))
    return cells
