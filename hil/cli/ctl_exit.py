"""`hil ctl`'s exit codes, for scripts: done, refused (the loop's reason said), bad input, stopped
short (e-stop, fault, safety hold, time out: the loop's last words said)."""

EXIT_DONE, EXIT_REFUSED, EXIT_INPUT, EXIT_SHORT = 0, 1, 2, 3
