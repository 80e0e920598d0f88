"""The records-manager service."""
