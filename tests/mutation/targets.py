"""What the mutation pass mutates, and the fast tests that must kill each mutant."""

from __future__ import annotations

# name: (the file mutated, the tests run against each mutant, the module run as plain Python)
TARGETS = {
    "safety": ("hil/safety/_kernel.py", ["tests/unit/test_safety.py", "tests/unit/test_controller.py"],
               "hil.safety._kernel"),
    "lifecycle": ("hil/runtime/lifecycle.py", ["tests/unit/test_lifecycle.py", "tests/unit/test_controller.py"], None),
    "joint_map": ("firmware_protocol/joint_map.py", ["tests/unit/test_joint_map.py"], None),
    "frame": ("firmware_protocol/frame.py", ["tests/unit/test_frame.py", "tests/unit/test_codec.py"], None),
}
