"""LeRobot's files and units, for LeRobot users: its calibration files (`motor_calibration`), its
normalised joint values (`units`) and its datasets (`dataset`). Nothing here imports LeRobot (it
needs Python ≥ 3.12 and torch); the formats are written from what its code reads."""
