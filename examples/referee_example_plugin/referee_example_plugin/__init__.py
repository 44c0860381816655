"""An example Referee plugin: one cheat profile and one honest variant, added without touching Referee.

* ``snap_after_delay`` (:mod:`referee_example_plugin.snap`): a cheat built on the public
  ``bots.cheats.CheatHooks`` API. It waits a human-looking reaction time after an enemy's head
  comes into view, then snaps the view onto it in one tick, fires, and hands the mouse back.
* ``honest_overshoot`` (:mod:`referee_example_plugin.overshoot`): an honest player (``cheat=False``)
  whose aim model (``bots.aim.AimModel``) makes flicks overshoot the target and come back.

Both are registered by entry points (see ``pyproject.toml``) and can also be named without
installing anything, as ``"referee_example_plugin:snap_after_delay"`` and
``"referee_example_plugin:honest_overshoot"`` with this folder on ``PYTHONPATH``.
"""

from referee_example_plugin.overshoot import Overshoot, OvershootParams, OvershootProfile
from referee_example_plugin.profiles import honest_overshoot, snap_after_delay
from referee_example_plugin.snap import SnapAfterDelay, SnapAfterDelayParams

__all__ = [
    "Overshoot",
    "OvershootParams",
    "OvershootProfile",
    "SnapAfterDelay",
    "SnapAfterDelayParams",
    "honest_overshoot",
    "snap_after_delay",
]
