"""The boards the protocol knows (SPEC.md §9), one row each: what the kind does that another does
not (its watchdog holds or brakes, its encoders need HOME) and what its emulators model by default.
The Python emulator, the C board (through `c_header`'s generated table), the C host build and
the launchers read these rows; a new board kind is one row here and one `BoardKind` member."""

from __future__ import annotations

import math
from dataclasses import dataclass

from firmware_protocol.messages import BoardKind


@dataclass(frozen=True)
class KindFacts:
    kind: BoardKind
    name: str                     # the emulators' --kind
    n_joints: int                 # 0: as many as the robot it stands for (its config's limits)
    watchdog_holds: bool          # the watchdog holds the last target (servos) rather than braking
    needs_homing: bool            # incremental encoders: NOT_HOMED until HOME; HOME unsupported otherwise
    # what an emulated board of this kind models unless told otherwise
    tau_s: float                  # first-order servo lag
    noise_rad: float              # measurement noise (1 sigma)
    resolution_rad: float         # quantisation of the measurement
    supply_mV: int
    max_step_rad: float           # largest accepted change of target per command
    vmax_rad_s: tuple[float, ...] = ()   # per joint rate limit (empty: the emulator's default)


SERVO_TICK_RAD = 2 * math.pi / 4096   # a 12-bit magnetic encoder

KINDS: tuple[KindFacts, ...] = (
    KindFacts(BoardKind.HUMANOID17, "humanoid17", 17, watchdog_holds=True, needs_homing=False, tau_s=0.03,
              noise_rad=5e-4, resolution_rad=SERVO_TICK_RAD, supply_mV=7400, max_step_rad=0.2,
              vmax_rad_s=(6.0,) * 17),
    KindFacts(BoardKind.PUMA6, "puma6", 6, watchdog_holds=False, needs_homing=True, tau_s=0.02, noise_rad=2e-5,
              resolution_rad=1e-5, supply_mV=48000, max_step_rad=0.05, vmax_rad_s=(1.4, 1.3, 2.1, 4.0, 4.2, 4.0)),
    KindFacts(BoardKind.SERVOS, "servos", 0, watchdog_holds=True, needs_homing=False, tau_s=0.03, noise_rad=5e-4,
              resolution_rad=SERVO_TICK_RAD, supply_mV=12000, max_step_rad=0.2),
)
BY_NAME = {k.name: k for k in KINDS}
BY_KIND = {k.kind: k for k in KINDS}


def facts_of(kind: int) -> KindFacts:
    """The row of a board kind (a HELLO_REPLY's byte or a `BoardKind`); KeyError for one we do not know."""
    return BY_KIND[BoardKind(kind)]
