"""The base layer every room stands on: nothing here imports another toolbias package but
:mod:`toolbias.errors`.

``engine`` and ``forked`` (one engine for every kind of job, forked workers), ``database``
(SQLite), ``canonical`` (canonical JSON and hashes), ``jsonfile`` (JSON files read with clear
errors), ``wirejson`` (fast JSON on the wire), ``plugins`` (the one registry idiom)
and ``names`` (tool-name rules). Import the module you need; this package
re-exports nothing, so importing one costs only that one.
"""
