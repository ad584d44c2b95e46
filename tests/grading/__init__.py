"""End to end grading: the CLI, the batch verb, the plugin, realistic bugs and faults."""
