"""The lesson: stubs generated from reference/, the notebook built from templates/lesson/, and its check()."""
