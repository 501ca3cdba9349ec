"""The schema-bias paper's artifact's own renderings, as one operator (``paper``).

toolbias's operators build each operator family its own way; this package reproduces the
artifact's constructions exactly (names, descriptions, parameter order, decoding), so a study
can set a new model beside the paper's published numbers. :mod:`.layer` is the operator,
:mod:`._build` the constructions, :mod:`._shapes` the tool shapes. The named variants that use
it are ``paper.*`` (:mod:`toolbias.variants.named.paper`).
"""
