"""Classification metrics against gold labels: accuracy, per-class precision/recall/F1 and the confusion matrix.

Predictions outside the four classes (a judge's ``judge_error``) get their own confusion-matrix column and
count as wrong; they are never dropped.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from mcpfleet.runner.toolcalls.models import LABELS


def _ratio(num: int, den: int) -> float | None:
    return num / den if den else None


def classification_report(gold: Sequence[str], predicted: Sequence[str]) -> dict[str, Any]:
    """Metrics of one system; ``gold`` and ``predicted`` are aligned label lists."""
    if len(gold) != len(predicted):
        raise ValueError(f"{len(gold)} gold labels but {len(predicted)} predictions")
    pairs = Counter(zip(gold, predicted, strict=True))
    columns = list(LABELS) + sorted({p for p in predicted if p not in LABELS})
    matrix = [[pairs[(g, p)] for p in columns] for g in LABELS]
    per_class: dict[str, dict[str, Any]] = {}
    for label in LABELS:
        tp = pairs[(label, label)]
        support = sum(1 for g in gold if g == label)
        predicted_n = sum(1 for p in predicted if p == label)
        precision, recall = _ratio(tp, predicted_n), _ratio(tp, support)
        f1 = (
            2 * precision * recall / (precision + recall)
            if precision is not None and recall is not None and precision + recall
            else (0.0 if precision is not None and recall is not None else None)
        )
        per_class[label] = {"precision": precision, "recall": recall, "f1": f1, "support": support}
    f1s = [m["f1"] for m in per_class.values() if m["support"]]
    correct = sum(pairs[(label, label)] for label in LABELS)
    return {
        "n": len(gold),
        "accuracy": _ratio(correct, len(gold)),
        "macro_f1": sum(f1 or 0.0 for f1 in f1s) / len(f1s) if f1s else None,
        "per_class": per_class,
        "confusion": {"rows": list(LABELS), "columns": columns, "matrix": matrix},
    }
