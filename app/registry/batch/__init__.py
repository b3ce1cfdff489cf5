"""batch/v1 kinds: Job."""
