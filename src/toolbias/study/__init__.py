"""Run a study: configuration and defaults, the episode loop, environments, scoring and success,
splits, probes and the recommender.

:func:`study_config` builds a :class:`StudyConfig` from what a user gives (every command goes
through it); :func:`build_study` resolves it into a :class:`Study` (catalog, variants, tasks,
provider) and :func:`run_study` plays it into the store.
"""

from .defaults import study_config
from .episode import Condition, EpisodeConfig, EpisodeRecord, Termination, run_episode
from .runner import Study, StudyConfig, build_study, run_study

__all__ = ["Condition", "EpisodeConfig", "EpisodeRecord", "Study", "StudyConfig", "Termination", "build_study",
           "run_episode", "run_study", "study_config"]
