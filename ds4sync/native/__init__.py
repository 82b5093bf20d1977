"""Native build of the fork: toolchain capture, the build driver and post-build proof.

Modules: ``toolchain`` (what compiled it), ``manifest`` (modules and op schemas expected), ``proof``
(imports and schemas checked in fresh subprocesses), ``driver`` (the build itself), ``phase`` (the
build phase). Build profiles and their environment are :mod:`ds4sync.models.native_profile`; what the
run record holds (toolchain, proof, build) is :mod:`ds4sync.models.native_results`.
"""
