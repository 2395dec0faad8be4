"""The columns of a feature matrix by name, without the cost of a frame.

The records route (``FeaturePipeline.transform_records`` in
:mod:`panda_predictor.core.features.pipeline`) gives a float32 matrix; the rules
that read a few of its columns (the recency rules, the requests) read them through
this mapping, as they would read a feature frame's columns.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence

import numpy as np


class MatrixColumns(Mapping[str, np.ndarray]):
    """The columns of a feature matrix by name (:meth:`FeaturePipeline.matrix_columns`).

    ``columns[name]`` is the matrix's column (a view; categorical ones hold codes).
    """

    def __init__(self, matrix: np.ndarray, positions: Mapping[str, int]) -> None:
        self.matrix = matrix
        self._positions = positions

    def __getitem__(self, name: str) -> np.ndarray:
        return self.matrix[:, self._positions[name]]

    def __contains__(self, name: object) -> bool:
        return name in self._positions

    def __iter__(self) -> Iterator[str]:
        return iter(self._positions)

    def __len__(self) -> int:
        return len(self._positions)

    def take(self, names: Sequence[str]) -> np.ndarray:
        """Return the named columns as an (n, len(names)) float64 array, NaN for a
        name the matrix does not have."""
        positions = self._positions
        found = [j for j, name in enumerate(names) if name in positions]
        if len(found) == len(names):
            return self.matrix[:, [positions[name] for name in names]].astype(
                np.float64
            )
        out = np.full((len(self.matrix), len(names)), np.nan)
        out[:, found] = self.matrix[:, [positions[names[j]] for j in found]]
        return out

    def first_row(self, names: Sequence[str]) -> list[float]:
        """Return the first row's named values as Python floats, NaN for a name
        the matrix does not have (what :meth:`take` gives for that row, without
        its array steps: the one-task route reads a row at a time)."""
        row = self.matrix[0].tolist()
        positions = self._positions
        return [
            float(row[positions[name]]) if name in positions else math.nan
            for name in names
        ]
