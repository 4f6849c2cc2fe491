"""firmware_protocol package."""

# the board's three implementations, which take the same options and agree request for request:
# the Python model (firmware_protocol.emulator), the C firmware's host build (c/host) and its ARM
# image on QEMU (firmware_protocol.qemu_board)
BOARD_IMPLEMENTATIONS = ("python", "c", "qemu")
