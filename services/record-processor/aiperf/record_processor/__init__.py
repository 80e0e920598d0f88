"""The record-processor service."""
