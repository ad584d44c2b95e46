"""The trusted lab code: the baseline, the evaluator, the trainer, the plots and the generated sources."""
