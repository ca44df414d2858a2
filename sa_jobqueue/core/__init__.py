"""Small pieces every layer shares: value checks, limits as values, durations, engines, asyncio.

Nothing here touches the jobs table or imports another part of the package but
`sa_jobqueue.errors`. See docs/architecture.md.
"""
