"""`hil robots`: the models, their joints and limits."""

from __future__ import annotations

import math

from firmware_protocol.buses import FIRST_BUS
from hil.cli.common import add_command


def register(sub) -> None:
    s = add_command(sub, "robots", "list robot models, joints and limits (degrees)",
                    "For each model: joints with their ranges, home pose and speed limit, frames and named poses.",
                    ["hil robots", "hil robots --robot humanoid17", "hil robots --robot my_arm.urdf",
                     f"hil robots --robot so101 --bus {FIRST_BUS}   # the servo map --bus uses, as a board config"])
    s.add_argument("--robot", help="only this robot: a shipped name, a .urdf file or a robot .toml file")
    s.add_argument("--bus", help="print the board config `--bus BUS` uses for --robot (shipped or generated), "
                                 "to start your own from")
    s.add_argument("--zenoh", nargs="?", const="", metavar="LOCATOR",
                   help="list the robots running on the network (`hil run --zenoh`), by scouting or at LOCATOR")
    s.add_argument("--zenoh-config", metavar="FILE", help="Zenoh's config file (JSON5) for --zenoh")
    s.set_defaults(func=run)


def run(args) -> int:
    from hil import robots  # (lazy, like every command's heavy imports: `hil --help` stays fast)
    from hil.robots import servos
    from hil.errors import ConfigError

    if args.zenoh is not None:
        return _list_remote(args.zenoh or None, args.zenoh_config)
    if args.bus:
        from hil import board_config
        from hil.errors import InputError

        if not args.robot:
            raise InputError("--bus prints a robot's servo map: name the robot with --robot")
        model = robots.load(args.robot)
        config = board_config.resolve(model, args.bus, None)
        geared = "".join(f"\n{line}" for line in board_config.geared_servos(config, model))
        print(board_config.to_toml(config, f"{config.source}\nservo ids, zero ticks and directions: check them "
                                           f"against your robot (docs/buses.md){geared}"), end="")
        return 0
    for name in [args.robot] if args.robot else robots.available():
        try:
            m = robots.load(name)
        except ConfigError as e:
            if args.robot:
                raise
            print(f"{name}: not available here ({e})")
            continue
        print(f"{m.name}: {m.meta.get('description', '')}")
        print(f"  {m.n} joints, base frame {m.base_frame!r}, tool frame {m.tool_frame!r}, "
              f"mass {m.total_mass:.2f} kg, loop rate {m.default_rate_hz:g} Hz unless --rate says otherwise")
        print(f"  {'#':>3} {'joint':<18} {'min (deg)':>10} {'max (deg)':>10} {'home':>8} {'vmax (deg/s)':>13}")
        for i, j in enumerate(m.joints):
            print(f"  {i:>3} {j.name:<18} {math.degrees(j.lower):>10.1f} {math.degrees(j.upper):>10.1f} "
                  f"{math.degrees(m.home[i]):>8.2f} {math.degrees(j.velocity_limit):>13.0f}")
        print(f"  frames: {', '.join(m.frame_names)}")
        print(f"  poses: {', '.join(m.poses)}")
        inputs = m.meta.get("transmission_inputs", {})   # transmissions turned round: the servo's own joint follows
        for f in m.followers:
            offset = (f" {'+' if f.offset >= 0 else '−'} {abs(math.degrees(f.offset)):.1f}°"
                      if abs(math.degrees(f.offset)) >= 0.05 else "")
            turned_by = " and ".join(m.joint_names[k] for k, _ in f.leaders())
            whose = (f"its servo's joint, commanded through {turned_by}"
                     if f.name in inputs or f.name in m.meta.get("differential_inputs", {}) else "no servo of its own")
            terms = f"{f.multiplier:g} · {m.joint_names[f.leader]}" + "".join(
                f" {'+' if c >= 0 else '−'} {abs(c):g} · {m.joint_names[lead]}" for lead, c in f.leaders()[1:])
            print(f"  follows: {f.name} = {terms}{offset} ({whose})")
        for note in m.meta.get("locked_joints", []):
            print(f"  not driven: {note}")
        for note in m.meta.get("narrowed_by_followers", []):
            print(f"  {note}")
        passive = m.meta.get("unactuated_joints", [])
        if passive:
            print(f"  moved by no actuator of its MJCF: {', '.join(passive)} (a linkage's passive joints, or joints "
                  "left free: hil plans and commands them as if servos moved them; a walk is not planned through them)")
        table = servos.servo_table(m)
        if table.declared:
            kinds = sorted({s.preset or "custom" for s in table.servos})
            print(f"  servos: {', '.join(kinds)} ({table.source})")
        for note in m.meta.get("notes", []):
            print(f"  note: {note}")
    return 0


def _list_remote(locator: str | None, config: str | None) -> int:
    from hil.remote import session as Z
    from hil.remote.zenoh_client import robots_on

    import time

    session = Z.open_session(Z.load_config(config, connect=locator))
    try:
        # asked again until the time is up: a query sent before the peers have connected reaches no one
        t_end = time.monotonic() + 5.0
        found = robots_on(session, timeout_s=1.0)
        while not found and time.monotonic() < t_end:
            found = robots_on(session, timeout_s=1.0)
    finally:
        session.close()
    if not found:
        print("no hil robot answers over Zenoh" + (f" at {locator}" if locator else "") +
              " (start one with `hil run … --zenoh`)")
        return 1
    for i in found:
        mode = "remote control on" if i.get("control") else "read-only, e-stop accepted"
        print(f"hil/{i['board']}: {i.get('robot')} ({i.get('n')} joints), loop {i.get('loop')} on port "
              f"{i.get('port')}, state at {i.get('rate_hz')} Hz, {mode}")
    return 0
