"""Textual pipelines: canonical round trip, located errors, Python-built pipelines."""

from __future__ import annotations

import pytest

from mxc.compiler.passes import PassManager, PassSpec, Pipeline, PipelineError, parse_pipeline


@pytest.mark.parametrize("text", [
    "",
    "dce",
    "remove-dropout,fold-batchnorm,dce,partition{backend=default op_names=exp;log}",
    "fold-constants{max_elements=100 keep=data;label}",
    'print-ir{label="two words"}',
    'x.y_z-1{a="q\\"uote" b=1;"two words";3}',
])
def test_canonical_text_round_trips(text):
    pipeline = parse_pipeline(text)
    assert str(pipeline) == text
    assert parse_pipeline(str(pipeline)) == pipeline


@pytest.mark.parametrize("text, canonical", [
    (" dce ,  cse ", "dce,cse"),
    ("partition{ backend=default\n op_names=exp;log }", "partition{backend=default op_names=exp;log}"),
    ("a{}", "a"),
    ('a{k="plain"}', "a{k=plain}"),
])
def test_whitespace_and_quotes_are_normalized(text, canonical):
    assert str(Pipeline.parse(text)) == canonical


def test_parsed_structure():
    p = parse_pipeline("dce,partition{backend=default op_names=exp;log}")
    assert [s.name for s in p] == ["dce", "partition"]
    assert p[1].options == {"backend": ("default",), "op_names": ("exp", "log")}
    assert p[1].column == 5 and p[1].option_columns == {"backend": 15, "op_names": 31}
    assert len(p) == 2 and repr(p).startswith("Pipeline('dce,")


def test_pipelines_built_in_python_print_canonically():
    p = Pipeline(["dce", ("partition", {"backend": "default", "op_names": ["exp", "log"]}),
                  PassSpec("print-ir", {"label": "a b"}), ("fold-constants", {"keep": ()})])
    assert str(p) == ('dce,partition{backend=default op_names=exp;log},print-ir{label="a b"},'
                      'fold-constants{keep=}')
    assert Pipeline(["remove-dropout{always=true}"])[0].options == {"always": ("true",)}


@pytest.mark.parametrize("text, column, message", [
    ("dce,", 5, "unexpected end of the pipeline; expected a pass name"),
    ("dce,,cse", 5, "unexpected ','; expected a pass name"),
    ("dce{", 5, "expected '}' or an option name"),
    ("dce{x}", 6, "unexpected '}'; expected '='"),
    ("dce{x=}", 7, "expected a quoted value or a value"),
    ("dce cse", 5, "unexpected 'cse'; expected ',' or '{'"),
    ("dce{a=1 a=2}", 9, "option 'a' of pass 'dce' is given twice"),
    ('dce{a="open', 7, "unexpected character '\"'"),
    ("d€e", 2, "unexpected '€e'; expected ',' or '{'"),
])
def test_syntax_errors_give_the_column(text, column, message):
    with pytest.raises(PipelineError) as info:
        parse_pipeline(text)
    err = info.value
    assert err.column == column and message in err.bare_message
    lines = str(err).splitlines()
    assert lines[0].startswith(f"pipeline column {column}: ")
    assert lines[1] == f"  {text}" and lines[2] == "  " + " " * (column - 1) + "^"


@pytest.mark.parametrize("text, column, message", [
    ("dce,fold-bn", 5, "unknown pass 'fold-bn' (did you mean 'fold-batchnorm'?); known "
                       "passes: "),
    ("dce{x=1}", 5, "pass 'dce' has no option 'x'; its options: none"),
    ("fold-constants{max-element=3}", 16, "has no option 'max-element' (did you mean "
                                          "'max_elements'?)"),
    ("fold-constants{max_elements=abc}", 29, "option max_elements=abc is invalid: expected an "
                                             "integer (int)"),
    ("remove-dropout{always=maybe}", 23, "expected a boolean"),
    ("cse,partition", 5, "option 'backend' is required"),
])
def test_resolution_errors_give_the_column_and_known_names(text, column, message):
    with pytest.raises(PipelineError) as info:
        PassManager(text)
    assert info.value.column == column
    assert message in str(info.value)


def test_unknown_pass_lists_every_known_pass():
    with pytest.raises(PipelineError) as info:
        PassManager("nope")
    known = info.value.bare_message.split("known passes: ")[1].split(", ")
    assert {"cse", "dce", "fold-batchnorm", "fold-constants", "partition", "print-ir",
            "remove-dropout", "simplify"} <= set(known) and known == sorted(known)


def test_dashes_and_underscores_name_the_same_option():
    a = PassManager("fold-constants{max-elements=5}")._resolved[0][2]
    b = PassManager("fold-constants{max_elements=5}")._resolved[0][2]
    assert a == b == {"max_elements": 5, "keep": []}


def test_python_built_pipeline_errors_have_no_column():
    with pytest.raises(PipelineError) as info:
        PassManager([("fold-constants", {"max_elements": "x"})])
    assert info.value.column is None and "max_elements=x is invalid" in str(info.value)
    with pytest.raises(PipelineError, match="must be a pass name"):
        Pipeline([42])


def test_pipeline_length_is_capped():
    """20,000 x dce (80 KB) used to parse and then run for 30 s."""
    from mxc.compiler.passes.pipeline import MAX_PIPELINE_CHARS, MAX_PIPELINE_PASSES
    at_cap = ",".join(["dce"] * MAX_PIPELINE_PASSES)
    assert len(Pipeline.parse(at_cap)) == MAX_PIPELINE_PASSES
    with pytest.raises(PipelineError, match=f"more than {MAX_PIPELINE_PASSES} passes"):
        Pipeline.parse(at_cap + ",dce")
    with pytest.raises(PipelineError, match=f"more than {MAX_PIPELINE_PASSES} passes"):
        Pipeline(["dce"] * (MAX_PIPELINE_PASSES + 1))
    huge = ",".join(["dce"] * 20_000)
    assert len(huge) > MAX_PIPELINE_CHARS
    with pytest.raises(PipelineError, match="characters long") as info:
        Pipeline.parse(huge)
    assert len(str(info.value)) < 300            # the message does not echo 80 KB of text
