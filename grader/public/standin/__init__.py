"""Stand-ins for the modules a piece's file imports, in the public checks of a student release.

In the graded run a piece's worker imports the reference's modules (`from .context import attention_context`), so a
piece is graded on its own. A release has no reference: its public checks give the piece's file these instead, so a
piece's check depends on no other piece's file (a stub, a bug, a syntax error). None of them is a piece's answer:
each has the documented signature and shapes and depends on its inputs, so a check sees that a piece hands them the
right tensors and uses what they return, and nothing a piece earns comes from them. The worker loads each as its
sibling module (`attnlab_submission.context`, ...); the judge imports them as grader.public.standin.*.
"""
