"""What a run reports: results, receipts, the timeline, progress, equivalence."""
