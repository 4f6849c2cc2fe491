"""Joint offset calibration: procedures (reference pose, directions, PUMA pose fit) and `hil calibrate`."""
