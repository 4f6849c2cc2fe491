"""Kinematics: Numba kernels behind `RobotModel` (FK, Jacobians, centre of mass, batches) and IK.

- `ik_puma(model, T)`: all 8 closed-form PUMA 560 branches (`IKSolutions`);
- `ik_lm(model, tasks, q0)`: prioritised Levenberg–Marquardt IK for any model (`IKResult`);
- `Task`: one IK objective (frame or centre of mass, target, mask, weight, priority).
"""

from hil.kinematics.ik import (BRANCH_LABELS, IKResult, IKSolutions, LMSolver, Task, check_pose, ik_lm, ik_puma,
                               solve_ik)

__all__ = ["BRANCH_LABELS", "IKResult", "IKSolutions", "LMSolver", "Task", "check_pose", "ik_lm", "ik_puma", "solve_ik"]
