"""Reports: the data behind them (``grid``), terminal tables, figures and the HTML report.

``build_report(store)`` computes everything once; ``print_report``, ``save_figures``,
``write_html`` and ``ReportData.to_json`` present it.
"""

from __future__ import annotations

from .grid import EpisodeView, ReportData, ReportSettings, build_report, dumps, select_episodes
from .tables import print_report

__all__ = ["EpisodeView", "ReportData", "ReportSettings", "build_report", "dumps", "print_report",
           "select_episodes"]
