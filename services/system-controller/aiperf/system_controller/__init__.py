"""The system-controller service: starts, supervises and stops every other service."""
