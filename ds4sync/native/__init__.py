"""Native build of the fork: profiles, toolchain capture, the build driver and post-build proof.

Modules: ``profile`` (build profiles and environment), ``toolchain`` (what compiled it),
``manifest`` (modules and op schemas expected), ``proof`` (imports and schemas checked in
fresh subprocesses), ``driver`` (the build itself and its phase), ``demo_ext`` (a small real
torch extension written by our code, for tests and ``ds4sync demo``).
"""

# ds4sync.config imports this package's profile module for its ``build:`` section; loading
# config first keeps that cycle in one order whichever module is imported first.
import ds4sync.config  # noqa: F401
