"""Tables and figures from results/*.json, the papers' reported values beside ours."""
