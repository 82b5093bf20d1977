"""The embedded sample fork: repository builder, demo patch-sets and native extension, and ``ds4sync demo``."""
