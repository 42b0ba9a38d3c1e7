"""Attribute value strings: parsing MXNet's spellings, printing, round trips."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, strategies as st

from mxc.errors import ParseError
from mxc.frontend.attrs import format_attr_value, parse_attr_value


@pytest.mark.parametrize("text, value", [
    ("(3, 3)", (3, 3)),
    ("[1, 2]", [1, 2]),
    ("None", None),
    ("True", True),
    ("false", False),
    ("-1", -1),
    ("1e-05", 1e-05),
    ("float32", "float32"),
    ("(1, None, -2)", (1, None, -2)),
    ("((1, 2), (3,))", ((1, 2), (3,))),
    ("(3,)", (3,)),
    ("()", ()),
    ("'relu'", "relu"),
    ("0.5", 0.5),
    ("-inf", -math.inf),
    ("  (2 ,3 )  ", (2, 3)),
])
def test_parses_mxnet_spellings(text, value):
    assert parse_attr_value(text) == value


@pytest.mark.parametrize("text, column", [("(3, 3", 5), ("(3,, 3)", 4), ("[1 2]", 4), ("", None)])
def test_malformed_values_report_the_column(text, column):
    with pytest.raises(ParseError) as err:
        parse_attr_value(text)
    assert "malformed attribute value" in str(err.value)
    if column is not None:
        assert err.value.column == column


def test_parse_results_are_cached():
    parse_attr_value.cache_clear()
    parse_attr_value("(7, 7)")
    parse_attr_value("(7, 7)")
    assert parse_attr_value.cache_info().hits == 1


def test_format_matches_python_str_as_mxnet_writes_kwargs():
    assert format_attr_value((3, 3)) == "(3, 3)"
    assert format_attr_value((1,)) == "(1,)"
    assert format_attr_value(True) == "True"
    assert format_attr_value(1e-5) == "1e-05"
    assert format_attr_value([1, 2]) == "[1, 2]"
    assert format_attr_value("relu") == "relu"


scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-2**63, 2**63),
    st.floats(allow_nan=False, width=64),
    st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,8}", fullmatch=True).filter(
        lambda s: s not in ("None", "True", "False", "true", "false", "inf", "nan")
        and s.lower() not in ("inf", "nan", "infinity")),
)
values = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4).map(tuple), st.lists(inner, max_size=4)), max_leaves=12)


@given(values)
def test_print_parse_round_trip(value):
    assert parse_attr_value(format_attr_value(value)) == value
