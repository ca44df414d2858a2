"""The jobs table and what stands beside it: `JobMixin`, the app's own columns, derived names, DDL.

Also the small state tables (paused queues, schedules, the starts log). Nothing
here runs a statement against a live database. See docs/architecture.md.
"""
