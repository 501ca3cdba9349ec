"""The schema-bias paper's artifact's own renderings, as one operator (``paper``).

toolbias's operators build each operator family its own way; this package reproduces the
artifact's constructions exactly (names, descriptions, parameter order, decoding), so a study
can set a new model beside the paper's published numbers. :mod:`.layer` is the operator,
``_build`` the constructions, ``_shapes`` the tool shapes and ``_answers`` the artifact's replies.
The named variants that use it are ``paper.*`` (:mod:`toolbias.variants.paper`).

The names other packages use (the proxy's paper mode, the spec-file loader) are exported here;
the private modules stay private.
"""

from ._answers import Transactions, answer, classify, merged_call, merged_problem
from ._build import OP_KINDS, Route, compile_ops, hierarchy, ladder
from ._canonical import canonical, openai_tool, prose_enum
from ._shapes import in_interval

__all__ = ["OP_KINDS", "Route", "Transactions", "answer", "canonical", "classify", "compile_ops", "hierarchy", "in_interval",
           "ladder", "merged_call", "merged_problem", "openai_tool", "prose_enum"]
