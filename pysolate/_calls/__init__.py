"""Calls across the boundary: the broker, a call's execution, crossings, worker threads, sharing."""
