"""A sync run's lifecycle: start, resume and abort it, the nightly job, promote."""
