"""The instructor's solved lab: the single source the student stubs are generated from."""
