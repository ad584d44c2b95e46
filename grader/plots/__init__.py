"""`grade --plots`: models trained in jailed workers (models.py), drawn here (draw.py)."""
