"""One table style for every command (mosaic.core.text_table)."""

from __future__ import annotations

from mosaic.core.text_table import format_table


def test_columns_are_two_spaces_apart_aligned_by_screen_width_with_no_trailing_space() -> None:
    text = format_table(["name", "mean"], [["漢字", "1.5"], ["a-long-name", "10.25"]],
                        right={1})
    assert text.splitlines() == [
        "name          mean",
        "漢字           1.5",  # two columns on screen per character
        "a-long-name  10.25",
    ]


def test_a_rule_goes_under_each_header() -> None:
    text = format_table(["operator", "n"], [["x", "12"]], right={1}, rule=True)
    assert text.splitlines() == ["operator   n", "--------  --", "x         12"]


def test_a_table_without_rows_is_its_header() -> None:
    assert format_table(["TYPE", "WHAT"], []) == "TYPE  WHAT"
