"""Publishing a sync: the forge client, the duplicate-work check, the draft PR, and the nightly notification."""
