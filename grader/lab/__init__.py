"""The lab's own model code: the toy task, the trusted training loop and evaluator, the baseline and Luong models, the artifacts."""
