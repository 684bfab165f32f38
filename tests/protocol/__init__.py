"""Sans-IO protocol tests: plain functions, no trio, no processes."""
