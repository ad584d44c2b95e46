"""Reports read by other tools."""
