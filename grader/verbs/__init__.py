"""The commands (`grade`, `grade batch`, `grade release ...`): one module each, a keyword-only main()."""
