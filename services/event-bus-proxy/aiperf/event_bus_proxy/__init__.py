"""The event-bus-proxy service."""
