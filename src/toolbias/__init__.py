"""toolbias: measure and mitigate interface bias in tool-using LLM agents.

The public, typed API is re-exported here, each name imported the first time it is used (so
``import toolbias`` and the CLI's start-up load only what they touch); the packages hold the
implementation: ``catalog``, ``operators``, ``variants``, ``providers``, ``study``, ``store``,
``report``, ``selection``, ``training``, ``proxy``, ``integrations``, ``cli`` and the ``base`` layer.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .base import moved

moved.install()  # old import paths (toolbias.runner, toolbias.codec, ...) keep working

if TYPE_CHECKING:
    from .catalog import (
        ActionError,
        ActionErrorKind,
        Catalog,
        Domain,
        NativeAction,
        Task,
        Tool,
        load_catalog,
        validate_action,
        validate_catalog,
    )
    from .errors import CatalogError, ProviderError, StoreError, ToolbiasError, VariantError
    from .operators import OPERATORS, Call, Flag, FlagKind, Layer, RejectionKind
    from .providers import GenerateConfig, ModelAPI, ModelOutput, ToolCall, make_provider
    from .report.grid import build_report
    from .store import Store, episodes_dataframe, export, merge_stores
    from .study import (
        Condition,
        EpisodeConfig,
        EpisodeRecord,
        StudyConfig,
        Termination,
        build_study,
        run_episode,
        run_study,
        study_config,
    )
    from .study.env import Environment
    from .study.probes import make_probes
    from .study.recommend import Recommendation, recommend
    from .study.scoring import FailureMode, exact_success, score_record
    from .study.stats import bootstrap_ci, paired_bootstrap
    from .training import ToolEnv, exact_success_reward, sft_examples
    from .variants import (
        Codec,
        Control,
        Decoded,
        Outcome,
        Session,
        VariantSpec,
        build_codec,
        get_variant,
        registry,
        resolve_variants,
    )

__version__ = "0.1.0"

#: public name -> the module (relative to this package) that defines it
_EXPORTS: dict[str, str] = {
    **dict.fromkeys(['ActionError', 'ActionErrorKind', 'Catalog', 'Domain', 'NativeAction', 'Task', 'Tool', 'load_catalog', 'validate_action', 'validate_catalog'], ".catalog"),
    **dict.fromkeys(['Codec', 'Control', 'Decoded', 'Outcome', 'Session', 'VariantSpec', 'build_codec', 'get_variant', 'registry', 'resolve_variants'], ".variants"),
    **dict.fromkeys(['Condition', 'EpisodeConfig', 'EpisodeRecord', 'StudyConfig', 'Termination', 'build_study', 'run_episode', 'run_study', 'study_config'], ".study"),
    **dict.fromkeys(['Environment'], ".study.env"),
    **dict.fromkeys(['make_probes'], ".study.probes"),
    **dict.fromkeys(['Recommendation', 'recommend'], ".study.recommend"),
    **dict.fromkeys(['FailureMode', 'exact_success', 'score_record'], ".study.scoring"),
    **dict.fromkeys(['CatalogError', 'ProviderError', 'StoreError', 'ToolbiasError', 'VariantError'], ".errors"),
    **dict.fromkeys(['OPERATORS', 'Call', 'Flag', 'FlagKind', 'Layer', 'RejectionKind'], ".operators"),
    **dict.fromkeys(['GenerateConfig', 'ModelAPI', 'ModelOutput', 'ToolCall', 'make_provider'], ".providers"),
    **dict.fromkeys(['build_report'], ".report.grid"),
    **dict.fromkeys(['bootstrap_ci', 'paired_bootstrap'], ".study.stats"),
    **dict.fromkeys(['Store', 'episodes_dataframe', 'export', 'merge_stores'], ".store"),
    **dict.fromkeys(['ToolEnv', 'exact_success_reward', 'sft_examples'], ".training"),
}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'toolbias' has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})


__all__ = [
    "ActionError", "ActionErrorKind", "Call", "Catalog", "CatalogError", "Codec", "Condition", "Control",
    "Decoded", "Domain", "Environment", "EpisodeConfig", "EpisodeRecord", "FailureMode", "Flag", "FlagKind",
    "GenerateConfig", "Layer", "ModelAPI", "ModelOutput", "NativeAction", "OPERATORS", "Outcome",
    "ProviderError", "Recommendation", "RejectionKind", "Session", "Store", "StoreError", "StudyConfig",
    "Task", "Termination", "Tool", "ToolCall", "ToolEnv", "ToolbiasError", "VariantError", "VariantSpec",
    "bootstrap_ci", "build_codec", "build_report", "build_study", "episodes_dataframe", "exact_success",
    "exact_success_reward", "export", "get_variant", "load_catalog", "make_probes", "make_provider",
    "merge_stores", "paired_bootstrap", "recommend", "registry", "resolve_variants", "run_episode",
    "run_study", "score_record", "sft_examples", "study_config", "validate_action", "validate_catalog"
]
