"""Public smoke checks: what a student release can grade locally without the sealed hidden cases.

They check shapes, dtypes, masking and the weighted-sum definition, never values that only the
reference knows; the graded run happens where the sealed cases can be opened (the seal key's holder). A piece
that imports another's module earns its point with the stand-ins of `standin/` in their place, and is
checked with the student's own files at no cost (grader.public.alone).
"""
