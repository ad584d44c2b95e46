"""The parent's side: stage a submission, start a judge per piece, schedule them, score from the manifest, report."""
