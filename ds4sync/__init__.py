"""ds4sync: keep a long-lived fork in sync with its upstream, and prove each sync."""

__version__ = "0.1.0"
