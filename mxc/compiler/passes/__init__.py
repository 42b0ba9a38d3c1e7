"""Graph passes: registration, pipelines, pattern rewrites and the built-in passes.

* :func:`register_pass` -- a function ``(graph, ctx) -> None | Graph`` or a
  :class:`Pass` class with typed :class:`Option` s, registered by name;
* :class:`PassContext` -- options + rewriter API + parameter bookkeeping;
* :class:`PassManager` / :func:`run` -- run a pipeline such as
  ``"remove-dropout,fold-batchnorm,dce"`` over a symbol and its parameters,
  with instruments and verification after every pass;
* :mod:`.pattern` / :mod:`.rewrite` -- declarative patterns and the greedy
  rewrite driver;
* :mod:`.builtin` -- ``dce``, ``remove-dropout``, ``simplify``,
  ``fold-constants``, ``fold-batchnorm``, ``cse``, ``partition``, ``print-ir``.

See ``docs/writing-a-pass.md``.
"""

from .context import ParamStore, PassContext, TypeInfo
from .instruments import (PassInstrument, PassTiming, PrintIRAfterAll, PrintIRAfterChange,
                          PrintIRAfterFailure, PrintIRBefore)
from .manager import PassManager, PipelineResult, run, run_graph
from .pattern import Match, Pattern, is_op, is_param, is_var, wildcard
from .pattern_text import parse_pattern
from .pipeline import PassSpec, Pipeline, PipelineError, parse_pipeline
from .registry import (REQUIRED, Option, OptionError, Pass, PassInfo, describe_passes, get_pass,
                       has_pass, list_passes, register_pass, unregister_pass)
from .rewrite import RewritePattern, rewrite

__all__ = [
    "register_pass", "unregister_pass", "get_pass", "has_pass", "list_passes",
    "describe_passes", "Pass", "PassInfo", "Option", "OptionError", "REQUIRED",
    "PassContext", "ParamStore", "TypeInfo",
    "PassManager", "PipelineResult", "run", "run_graph",
    "Pipeline", "PassSpec", "PipelineError", "parse_pipeline",
    "PassInstrument", "PassTiming", "PrintIRAfterAll", "PrintIRAfterFailure", "PrintIRBefore",
    "PrintIRAfterChange",
    "Pattern", "Match", "wildcard", "is_var", "is_param", "is_op", "parse_pattern",
    "RewritePattern", "rewrite",
]
