"""The dataset-manager service."""
