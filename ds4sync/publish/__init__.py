"""Publishing a sync: the forge client, the draft PR, and the nightly notification.

The duplicate-work check, run before a draft PR is opened, is :mod:`ds4sync.models.publish_duplicates`.
"""
