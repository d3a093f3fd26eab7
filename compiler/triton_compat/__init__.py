"""Stand-in for the `triton` package (filled in below)."""
