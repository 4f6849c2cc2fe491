"""Motion sources and planners: G-code paths for the PUMA, humanoid motions and walking."""
