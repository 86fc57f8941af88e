"""The moving average plot --smooth draws, and the rule that makes step values plain columns."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from mosaic.results import flatten_column, format_for, moving_average

pytestmark = pytest.mark.timeout(30)


def test_moving_average_is_trailing_and_shorter_at_the_start() -> None:
    values = np.array([1.0, 2.0, 3.0, 4.0, 10.0])
    np.testing.assert_allclose(moving_average(values, 3), [1.0, 1.5, 2.0, 3.0, 17 / 3])
    np.testing.assert_allclose(moving_average(values, 1), values)


def test_small_arrays_get_a_column_per_element_in_place() -> None:
    frame = pd.DataFrame({"step": [0, 1], "observation": [np.arange(4.0), np.ones(4)],
                          "reward": [1.0, 0.0]})
    flat = flatten_column(frame, "observation")
    assert list(flat.columns) == ["step", *(f"observation_{i}" for i in range(4)), "reward"]
    assert flat.iloc[0, 1:5].tolist() == [0.0, 1.0, 2.0, 3.0]


def test_scalars_stay_one_column_and_the_rest_becomes_json() -> None:
    scalars = flatten_column(pd.DataFrame({"action": [np.int64(1), np.int64(0)]}), "action")
    assert scalars["action"].tolist() == [1, 0]
    image = np.zeros((2, 3, 3), np.uint8)  # 18 elements: more than a column each
    ragged = flatten_column(pd.DataFrame({"observation": [image, {"a": np.arange(2)}]}),
                            "observation")
    assert json.loads(ragged["observation"][0]) == image.tolist()
    assert json.loads(ragged["observation"][1]) == {"a": [0, 1]}


def test_the_format_comes_from_the_option_then_the_suffix() -> None:
    assert format_for("x.parquet", None) == "parquet"
    assert format_for("x.parquet", "csv") == "csv"
    assert format_for(None, None) == "csv"
    with pytest.raises(ValueError, match="give --out FILE"):
        format_for(None, "parquet")
    with pytest.raises(ValueError, match="cannot tell the format"):
        format_for("x.txt", None)
