"""The stages of a build, in the order the graph runs them: the one table the engine is handed.

Each stage owns its task dicts, what its tasks add to the run's report and its explain rules
(`core/stage_seam.Stage`); the engine assembles the stages it is given and names none of them. Adding a
stage is a `Stage` in its own package and a line here.
"""
from __future__ import annotations

from .compile import stage as compile_stage
from .pto import STAGE as PTO
from .run import STAGE as RUN

STAGES = (PTO, compile_stage.PRELUDE, compile_stage.COMPILE, compile_stage.STAMP, RUN)
