"""Cheat profiles: each cheat family is a small :class:`bots.hooks.ClientHooks` layer over the
honest client and brain, one module per family.

=================  ===================================================  =====================
module             profiles                                             where the cheat sits
=================  ===================================================  =====================
``aimbot``         lock_aimbot, rage_aimbot, smooth_aimbot              view angles (intent)
``silent``         silent_aim, proaim                                   shot angles and claims
``trigger``        triggerbot                                           FIRE (intent)
``recoil``         no_recoil                                            view + recoil report
``movement``       speedhack, teleport, noclip                          commands and claims
``fire``           cbug, rapid_fire                                     fire timing
``esp``            wallhack                                             what the brain sees
``netcode``        backtrack, fake_lag                                  view times, packets
=================  ===================================================  =====================

``base`` holds the common hooks base class and the build context, ``targeting`` the client-side
geometry the aim cheats share, ``params`` the parameter parsing. The registry of profiles is
``bots.profiles``. A cheat knows only what a client knows: the protocol, the map and its
snapshots; nothing here imports the server's internals or the anti-cheat.
"""

from bots.cheats.aimbot import (
    LockAimbot,
    LockParams,
    RageAimbot,
    RageParams,
    SmoothAimbot,
    SmoothParams,
)
from bots.cheats.base import BuildContext, CheatHooks
from bots.cheats.esp import (
    EspBrain,
    EspTargetSelector,
    Wallhack,
    WallhackParams,
    esp_brain,
)
from bots.cheats.fire import CBug, CBugParams, RapidFire, RapidFireParams
from bots.cheats.movement import (
    Noclip,
    NoclipParams,
    Speedhack,
    SpeedhackParams,
    Teleport,
    TeleportParams,
)
from bots.cheats.netcode import Backtrack, BacktrackParams, FakeLag, FakeLagParams
from bots.cheats.recoil import NoRecoil, NoRecoilParams
from bots.cheats.silent import ProAim, ProAimParams, SilentAim, SilentAimParams
from bots.cheats.trigger import Triggerbot, TriggerbotParams

__all__ = [
    "Backtrack",
    "BacktrackParams",
    "BuildContext",
    "CBug",
    "CBugParams",
    "CheatHooks",
    "EspBrain",
    "EspTargetSelector",
    "FakeLag",
    "FakeLagParams",
    "LockAimbot",
    "LockParams",
    "NoRecoil",
    "NoRecoilParams",
    "Noclip",
    "NoclipParams",
    "ProAim",
    "ProAimParams",
    "RageAimbot",
    "RageParams",
    "RapidFire",
    "RapidFireParams",
    "SilentAim",
    "SilentAimParams",
    "SmoothAimbot",
    "SmoothParams",
    "Speedhack",
    "SpeedhackParams",
    "Teleport",
    "TeleportParams",
    "Triggerbot",
    "TriggerbotParams",
    "Wallhack",
    "WallhackParams",
    "esp_brain",
]
