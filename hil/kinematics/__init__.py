"""Kinematics: Numba kernels behind `RobotModel` (FK, Jacobians, centre of mass, batches)."""
