"""Integrations, sans-IO: plain functions over payloads and answers."""
