"""The `Driver` protocol by family, one module each; `sa_jobqueue.driver.base` joins them.

Each family is a `typing.Protocol` of the operations of one part of the library (enqueue,
durable steps, schedules, control); its conformance tests are ``tests/driver/test_<family>.py``.
See docs/architecture.md.
"""
