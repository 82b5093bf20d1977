"""Native build of the fork: profiles, toolchain capture, the build driver and post-build proof.

Modules: ``profile`` (build profiles and environment), ``toolchain`` (what compiled it),
``manifest`` (modules and op schemas expected), ``proof`` (imports and schemas checked in
fresh subprocesses), ``driver`` (the build itself), ``phase`` (the build phase), ``results``
(the models the run record holds: toolchain, proof, build).
"""
