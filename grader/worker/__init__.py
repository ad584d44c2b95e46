"""The untrusted side: the only code that ever runs a submission.

A worker is a jailed process forked from `server` (which holds no secrets). It receives sources,
sizes, weights and tensors from the judge over one socket, runs the student's code on them, and
sends back plain data. It never holds a hidden case, an expected value, the seed file or a key.
"""
