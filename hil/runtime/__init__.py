"""The real-time loop process, shared state with the other processes, recording, motion sources."""
