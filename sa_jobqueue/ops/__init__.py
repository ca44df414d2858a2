"""The operator API that the CLI and the dashboard share: stats, repair, retention, pausing.

See docs/operations.md.
"""
