"""Physics in the loop: the robot in MuJoCo behind the board emulators (`--physics`).

`build.build(robot)` makes the MuJoCo model of any hil robot from its RobotModel and servo table;
`plant.PhysicsPlant` is that model as a board's `firmware_protocol.plant.Plant`; `emulate` is the
emulator process with physics behind it. MuJoCo is an optional extra: `pip install -e '.[physics]'`.
"""
