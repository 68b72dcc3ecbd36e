"""Custom widgets of the app (each file one widget)."""
