"""The trusted side's window onto a worker: it starts jailed workers and asks them for values.

The judge (the hidden cases, the reference, expected values, the key) never imports submission
code; it calls it through `remote.CaseHandle`, whose answers arrive as checked plain data.
"""
