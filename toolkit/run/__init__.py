"""One agent run under the benchmark's rules: workspace, clock, submissions, grading, result."""
