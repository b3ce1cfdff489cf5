"""DRA scheduler: pure device allocation (allocator.py) and the scheduling loop."""
