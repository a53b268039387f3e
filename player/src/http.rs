//! HTTP: /profile /metrics /health and the dashboard. Read-only.
