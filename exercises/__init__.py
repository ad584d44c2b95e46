"""Your attention lab: one file per piece. Grade it with `grade`."""
