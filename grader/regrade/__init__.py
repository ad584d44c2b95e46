"""The class regrade: shards, their merge, deadlines, the similarity and class reports."""
