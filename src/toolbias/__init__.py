"""toolbias: measure and mitigate interface bias in tool-using LLM agents.

The public, typed API is re-exported here; submodules hold the implementation.
"""

from __future__ import annotations

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
from .codec import Codec, Control, Decoded, Outcome, Session
from .defaults import study_config
from .env import Environment
from .episode import Condition, EpisodeConfig, EpisodeRecord, Termination, run_episode
from .errors import CatalogError, ProviderError, StoreError, ToolbiasError, VariantError
from .operators import OPERATORS, Call, Flag, FlagKind, Layer, RejectionKind
from .probes import make_probes
from .providers import GenerateConfig, ModelAPI, ModelOutput, ToolCall, make_provider
from .recommend import Recommendation, recommend
from .report.grid import build_report
from .runner import StudyConfig, build_study, run_study
from .scoring import FailureMode, exact_success, score_record
from .stats import bootstrap_ci, paired_bootstrap
from .store import Store, episodes_dataframe, export, merge_stores
from .training import ToolEnv, exact_success_reward, sft_examples
from .variants import VariantSpec, build_codec, get_variant, registry, resolve_variants

__version__ = "0.1.0"

__all__ = [
    "Condition", "EpisodeConfig", "EpisodeRecord", "FailureMode", "GenerateConfig", "ModelAPI", "ModelOutput",
    "Recommendation", "Store", "StudyConfig", "Termination", "ToolCall", "ToolEnv", "bootstrap_ci", "build_report",
    "build_study", "episodes_dataframe", "exact_success", "exact_success_reward", "export", "make_probes",
    "make_provider", "merge_stores", "paired_bootstrap", "recommend", "run_episode", "run_study", "score_record",
    "sft_examples", "study_config",
    "OPERATORS", "ActionError", "ActionErrorKind", "Call", "Catalog", "CatalogError", "Codec", "Control",
    "Decoded", "Domain", "Environment", "Flag", "FlagKind", "Layer", "NativeAction", "Outcome", "ProviderError",
    "RejectionKind", "Session", "StoreError", "Task", "Tool", "ToolbiasError", "VariantError", "VariantSpec",
    "build_codec", "get_variant", "load_catalog", "registry", "resolve_variants", "validate_action",
    "validate_catalog",
]
