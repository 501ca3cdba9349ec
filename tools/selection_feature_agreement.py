"""How far fresh paper features are from the authors' (README, "The paper's items"): the Pearson r, over the
50 BiasBusters APIs and cluster-centred, between each feature toolbias computes offline and the authors'
``final_features.json`` (ada-002 similarity, textstat readability).

    python tools/selection_feature_agreement.py [../shared/data/biasbusters] [tfidf|minilm]
"""

from __future__ import annotations

import datetime as dt
import sys

import numpy as np

from toolbias.selection import paper_features as pf
from toolbias.selection.benchmark import load_benchmark


def main(folder: str = "../shared/data/biasbusters", similarity: str = "tfidf") -> None:
    bench = load_benchmark(f"biasbusters:{folder}")
    paper = pf.load_feature_table(f"{folder}/final_features.json")
    fresh = pf.feature_table(bench, similarity=similarity, today=dt.date(2025, 7, 25))
    both = paper.merge(fresh, on=["cluster", "api"], suffixes=("_paper", "_fresh"))
    for f in pf.PAPER_FEATURES:
        a, b = f"{f}_paper", f"{f}_fresh"
        if a not in both or b not in both:
            continue
        rows = both[[a, b, "cluster"]].dropna()
        ca = rows[a] - rows.groupby("cluster")[a].transform("mean")
        cb = rows[b] - rows.groupby("cluster")[b].transform("mean")
        print(f"{similarity} {f}: n {len(rows)}, r (cluster-centred) {float(np.corrcoef(ca, cb)[0, 1]):.3f}")


if __name__ == "__main__":
    main(*sys.argv[1:])
