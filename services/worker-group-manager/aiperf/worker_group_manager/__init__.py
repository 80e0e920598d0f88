"""The worker-group-manager service."""
