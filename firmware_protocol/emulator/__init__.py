"""Board emulators (PUMA6 and HUMANOID17) speaking the wire protocol on a pseudo-terminal."""
