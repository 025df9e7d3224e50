"""Shared machinery of the bundled sites: app factory, per-request context, sessions, CSRF, pagination,
forms, the append-only audit log, the site clock, deterministic seeding helpers and the server entry point."""
