"""The DearPyGui digital twin (its own process): `hil twin`, or opened by `hil run`."""
