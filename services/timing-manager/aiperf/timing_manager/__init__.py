"""The timing-manager service."""
